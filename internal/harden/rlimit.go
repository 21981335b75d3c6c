package harden

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// EnvRlimits is the environment variable that carries the resource limits
// a role sets on itself before it hardens, as Docker's --ulimit values
// separated by commas: "fsize=67108864:67108864,nofile=4096:4096". The
// Kubernetes mapping sets it: a pod takes no ulimits, so the runtime's
// defaults (no file size limit) would apply. The Docker engine sets the
// same limits on the container before any code of ours runs, and on
// processes entering it with `docker exec` too, so a Docker run leaves
// the variable unset.
const EnvRlimits = "MCPSIDECAR_RLIMITS"

// LayerRlimits names the resource limits in a [Report]'s layers. It is
// never best effort: lowering a limit cannot fail for lack of a kernel
// feature.
const LayerRlimits = "rlimits"

// Rlimit is one resource limit, named as Docker's --ulimit names it.
type Rlimit struct {
	Name string
	Soft uint64
	Hard uint64
}

func (r Rlimit) String() string { return fmt.Sprintf("%s=%d:%d", r.Name, r.Soft, r.Hard) }

// rlimitNames are the limits a role sets on itself. fsize answers a role
// filling the disk behind a writable path (probe T18); nofile bounds the
// descriptors, hence the connections, a role holds. nproc is not among
// them: RLIMIT_NPROC counts the processes of the real uid across the
// whole user namespace, not the role's (internal/kube leaves it out).
var rlimitNames = []string{"fsize", "nofile"}

func (r Rlimit) validate() error {
	switch {
	case !slices.Contains(rlimitNames, r.Name):
		return fmt.Errorf("limit %q: a role sets only %v on itself", r.Name, rlimitNames)
	case r.Soft > r.Hard:
		return fmt.Errorf("limit %s: soft %d is above hard %d", r.Name, r.Soft, r.Hard)
	}
	return nil
}

// FormatRlimits is the value of [EnvRlimits] for ls; a limit a role
// cannot set on itself is an error, so none is dropped silently.
func FormatRlimits(ls []Rlimit) (string, error) {
	parts := make([]string, 0, len(ls))
	for _, r := range ls {
		if err := r.validate(); err != nil {
			return "", err
		}
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ","), nil
}

// RlimitsFromEnv reads [EnvRlimits] through getenv: none when it is unset
// or empty. A malformed value is an error, so a typo never silently
// leaves a limit unset.
func RlimitsFromEnv(getenv func(string) string) ([]Rlimit, error) {
	raw := getenv(EnvRlimits)
	if raw == "" {
		return nil, nil
	}
	var out []Rlimit
	for _, part := range strings.Split(raw, ",") {
		r, err := parseRlimit(part)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", EnvRlimits, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// parseRlimit reads NAME=SOFT:HARD.
func parseRlimit(s string) (Rlimit, error) {
	name, vals, ok1 := strings.Cut(s, "=")
	soft, hard, ok2 := strings.Cut(vals, ":")
	if !ok1 || !ok2 {
		return Rlimit{}, fmt.Errorf("%q: want NAME=SOFT:HARD", s)
	}
	r := Rlimit{Name: name}
	var err1, err2 error
	r.Soft, err1 = strconv.ParseUint(soft, 10, 64)
	r.Hard, err2 = strconv.ParseUint(hard, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Rlimit{}, fmt.Errorf("%q: %w", s, err)
	}
	return r, r.validate()
}

// lowered is the limit set for want under the hard limit in force: never
// above it (an unprivileged process cannot raise it, and a lower one is
// already stricter than asked).
func lowered(want Rlimit, curHard uint64) (soft, hard uint64) {
	hard = min(want.Hard, curHard)
	return min(want.Soft, hard), hard
}

func rlimitsDetail(set []Rlimit) string {
	parts := make([]string, len(set))
	for i, r := range set {
		parts[i] = r.String()
	}
	return "set by the role (no ulimits from the engine): " + strings.Join(parts, ", ")
}
