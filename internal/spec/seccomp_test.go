//go:build linux

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

// permits evaluates the daemon-expanded allow rules for name the way
// libseccomp does: a rule matches when all its conditions hold (each on
// its own argument, as runc requires), and any matching rule allows.
func permits(rules []specs.LinuxSyscall, args [6]uint64) bool {
	for _, r := range rules {
		if slices.IndexFunc(r.Args, func(a specs.LinuxSeccompArg) bool { return !argHolds(a, args[a.Index]) }) < 0 {
			return true
		}
	}
	return false
}

func argHolds(a specs.LinuxSeccompArg, v uint64) bool {
	switch a.Op {
	case specs.OpEqualTo:
		return v == a.Value
	case specs.OpNotEqual:
		return v != a.Value
	case specs.OpLessThan:
		return v < a.Value
	case specs.OpLessEqual:
		return v <= a.Value
	case specs.OpGreaterThan:
		return v > a.Value
	case specs.OpGreaterEqual:
		return v >= a.Value
	case specs.OpMaskedEqual:
		return v&a.Value == a.ValueTwo
	}
	panic("unknown operator " + a.Op)
}

// TestSeccompArgumentRules: the profile refuses TCP Fast Open sends and
// setuid/setgid modes, and allows the same calls without them.
func TestSeccompArgumentRules(t *testing.T) {
	const (
		oCreat   = 0o100
		oTmpfile = 0o20200000
		fastOpen = 0x20000000
		noSignal = 0x4000
	)
	al := allowed(loadAsDaemon(t, nil))
	tests := []struct {
		name    string
		syscall string
		args    [6]uint64
		want    bool
	}{
		{"sendto flags 0", "sendto", [6]uint64{3, 0, 1, 0}, true},
		{"sendto MSG_NOSIGNAL", "sendto", [6]uint64{3, 0, 1, noSignal}, true},
		{"sendto MSG_FASTOPEN|MSG_NOSIGNAL", "sendto", [6]uint64{3, 0, 1, fastOpen | noSignal}, false},
		{"sendto MSG_FASTOPEN with high bits", "sendto", [6]uint64{3, 0, 1, 1<<32 | fastOpen}, false},
		{"sendmsg flags 0", "sendmsg", [6]uint64{3, 0, 0}, true},
		{"sendmsg MSG_FASTOPEN", "sendmsg", [6]uint64{3, 0, fastOpen}, false},
		{"sendmmsg MSG_FASTOPEN", "sendmmsg", [6]uint64{3, 0, 1, fastOpen}, false},
		{"chmod 0755", "chmod", [6]uint64{0, 0o755}, true},
		{"chmod 04755", "chmod", [6]uint64{0, 0o4755}, false},
		{"chmod 02755", "chmod", [6]uint64{0, 0o2755}, false},
		{"fchmod 01777", "fchmod", [6]uint64{3, 0o1777}, true},
		{"fchmod 06755", "fchmod", [6]uint64{3, 0o6755}, false},
		{"fchmodat 0644", "fchmodat", [6]uint64{3, 0, 0o644}, true},
		{"fchmodat 04755", "fchmodat", [6]uint64{3, 0, 0o4755}, false},
		{"fchmodat2 04755", "fchmodat2", [6]uint64{3, 0, 0o4755, 0}, false},
		{"mknodat S_IFREG|04755", "mknodat", [6]uint64{3, 0, 0o104755, 0}, false},
		{"openat read, any mode", "openat", [6]uint64{3, 0, 0, 0o6755}, true},
		{"openat O_CREAT 0644", "openat", [6]uint64{3, 0, oCreat | 1, 0o644}, true},
		{"openat O_CREAT 04755", "openat", [6]uint64{3, 0, oCreat | 1, 0o4755}, false},
		{"openat O_TMPFILE 02755", "openat", [6]uint64{3, 0, oTmpfile | 2, 0o2755}, false},
		{"open O_CREAT 04755", "open", [6]uint64{0, oCreat | 1, 0o4755}, false},
		{"creat 04755", "creat", [6]uint64{0, 0o4755}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, ok := al[tt.syscall]
			if !ok {
				t.Fatalf("%s is not allowed at all", tt.syscall)
			}
			if got := permits(rules, tt.args); got != tt.want {
				t.Errorf("got allowed %v, want %v (rules %+v)", got, tt.want, rules)
			}
		})
	}
}
