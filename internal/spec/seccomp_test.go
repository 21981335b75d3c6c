package spec

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// loadAsDaemon expands the profile the way dockerd does for a container
// with the given capabilities.
func loadAsDaemon(t *testing.T, caps []string) *specs.LinuxSeccomp {
	t.Helper()
	raw, err := SeccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	rs := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps}}}
	lp, err := seccomp.LoadProfile(string(raw), rs)
	if err != nil {
		t.Fatalf("dockerd would refuse the profile: %v", err)
	}
	return lp
}

func allowed(lp *specs.LinuxSeccomp) map[string][]specs.LinuxSyscall {
	m := map[string][]specs.LinuxSyscall{}
	for _, r := range lp.Syscalls {
		if r.Action != specs.ActAllow {
			continue
		}
		for _, n := range r.Names {
			m[n] = append(m[n], r)
		}
	}
	return m
}

func TestSeccompDenials(t *testing.T) {
	for _, caps := range [][]string{nil, {"CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_BOOT"}} {
		lp := loadAsDaemon(t, caps)
		if lp.DefaultAction != specs.ActErrno {
			t.Fatalf("default action %s", lp.DefaultAction)
		}
		al := allowed(lp)
		for _, n := range DeniedSyscalls() {
			if _, ok := al[n]; ok {
				t.Errorf("caps %v: %s is allowed", caps, n)
			}
		}
		for _, r := range al["clone"] {
			if len(r.Args) == 0 {
				t.Errorf("caps %v: clone allowed without a namespace-flag filter", caps)
			}
		}
		if _, ok := al["clone3"]; ok {
			t.Errorf("caps %v: clone3 allowed (its flags cannot be filtered)", caps)
		}
	}
}

func TestSeccompKeepsWhatGoNeeds(t *testing.T) {
	al := allowed(loadAsDaemon(t, nil))
	for _, n := range []string{"read", "write", "openat", "mmap", "futex", "epoll_pwait", "socket", "connect", "clone", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp", "prctl"} {
		if _, ok := al[n]; !ok {
			t.Errorf("%s is not allowed", n)
		}
	}
}

func TestSeccompIsValidJSON(t *testing.T) {
	raw, err := SeccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains([]string{"SCMP_ACT_ERRNO"}, v["defaultAction"].(string)) {
		t.Errorf("defaultAction %v", v["defaultAction"])
	}
}
