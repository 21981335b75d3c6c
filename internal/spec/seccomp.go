package spec

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// seedDenied are the seed's 35 extra denials, plus io_uring (a large
// kernel attack surface, and a way around seccomp filters on the
// operations it performs) and userfaultfd (used to widen kernel race
// windows in exploits).
var seedDenied = []string{
	"acct", "add_key", "bpf", "delete_module", "finit_module", "get_mempolicy",
	"init_module", "ioperm", "iopl", "keyctl", "kcmp", "lookup_dcookie", "mbind", "mount",
	"move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
	"perf_event_open", "personality", "pidfd_getfd", "pivot_root", "process_vm_readv",
	"process_vm_writev", "ptrace", "quotactl", "reboot", "request_key", "set_mempolicy",
	"setns", "syslog", "umount", "umount2", "unshare",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
}

// DeniedSyscalls returns the names denied on top of Docker's default.
func DeniedSyscalls() []string { return slices.Clone(seedDenied) }

// SeccompProfile is Docker's default profile (moby/profiles/seccomp)
// tightened: the denied names are removed from every allow rule (the
// default action is already ERRNO, so they fall to it) and listed in one
// explicit ERRNO rule for readers; and namespace creation is refused even
// if CAP_SYS_ADMIN were ever added (the threat: a user namespace is the
// first step of many container escapes).
//
// The result depends on nothing but this package, so it is built once.
func SeccompProfile() ([]byte, error) {
	b, err := seccompOnce()
	return slices.Clone(b), err
}

var seccompOnce = sync.OnceValues(func() ([]byte, error) {
	var p seccomp.Seccomp
	if err := json.Unmarshal(mobyDefault, &p); err != nil {
		return nil, fmt.Errorf("reading Docker's default seccomp profile (seccomp_moby.json): %w", err)
	}
	return tighten(&p)
})

// mobyDefault is Docker's default profile, seccomp.DefaultProfile() of
// the moby/profiles version in go.mod, encoded once: that function exists
// only in the library's Linux build, and the profile is the engine's (a
// Linux kernel's) whatever the host runs. seccomp_linux_test.go checks
// the file is the library's profile and that the result is byte for byte
// what the library's own value gives; `go test ./internal/spec -run
// TestMobyProfileVendored -update` rewrites it after a version change.
//
//go:embed seccomp_moby.json
var mobyDefault []byte

// tighten applies this package's changes to Docker's default profile p
// and encodes the result.
func tighten(p *seccomp.Seccomp) ([]byte, error) {
	kept := p.Syscalls[:0]
	for _, rule := range p.Syscalls {
		if rule.Action == specs.ActAllow {
			rule.Names = slices.DeleteFunc(rule.Names, func(n string) bool {
				return slices.Contains(seedDenied, n) || grantsNamespaces(rule, n)
			})
			if len(rule.Names) == 0 {
				continue
			}
		}
		unconditionalNamespaceRule(rule)
		kept = append(kept, rule)
	}
	kept = append(kept, argumentRules(kept)...)
	eperm := uint(1)
	kept = append(kept, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: DeniedSyscalls(), Action: specs.ActErrno, ErrnoRet: &eperm},
		Comment:      "mcpsidecar: denied beyond Docker's default profile",
	})
	p.Syscalls = kept
	out, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding seccomp profile: %w", err)
	}
	return append(out, '\n'), nil
}

// Argument rules, in the moby format. Each entry of argRules is one allow
// rule (their conditions ANDed); several entries for one name are ORed.
// Every comparison is a SCMP_CMP_MASKED_EQ with a mask inside the low 32
// bits, so bits an attacker sets in the high half of an int argument (the
// kernel ignores them) cannot change the outcome. A call matching none
// falls to the profile's default action, EPERM.
//
// The threats: TCP Fast Open connects inside sendto/sendmsg/sendmmsg,
// where Landlock's connect rule never looks (landlock-lsm/linux issue 41);
// a setuid or setgid file left in the output directory runs as the
// container's user for anyone on the host. The in-process filter
// (internal/harden) refuses the same and more (setsockopt
// TCP_FASTOPEN_CONNECT, which this format cannot express without a
// 64-bit "not equal" an attacker could dodge).
const (
	setIDBits       = 0o6000     // S_ISUID | S_ISGID
	msgFastOpen     = 0x20000000 // MSG_FASTOPEN
	openCreateFlags = 0o100 | 0x400000
)

func maskedZero(index uint, mask uint64) specs.LinuxSeccompArg {
	return specs.LinuxSeccompArg{Index: index, Value: mask, ValueTwo: 0, Op: specs.OpMaskedEqual}
}

var argRules = map[string][][]specs.LinuxSeccompArg{
	"sendto":    {{maskedZero(3, msgFastOpen)}},
	"sendmsg":   {{maskedZero(2, msgFastOpen)}},
	"sendmmsg":  {{maskedZero(3, msgFastOpen)}},
	"chmod":     {{maskedZero(1, setIDBits)}},
	"fchmod":    {{maskedZero(1, setIDBits)}},
	"fchmodat":  {{maskedZero(2, setIDBits)}},
	"fchmodat2": {{maskedZero(2, setIDBits)}},
	"mknod":     {{maskedZero(1, setIDBits)}},
	"mknodat":   {{maskedZero(2, setIDBits)}},
	"creat":     {{maskedZero(1, setIDBits)}},
	// The mode counts only when the flags create a file.
	"open":   {{maskedZero(1, openCreateFlags)}, {maskedZero(2, setIDBits)}},
	"openat": {{maskedZero(2, openCreateFlags)}, {maskedZero(3, setIDBits)}},
}

// argumentRules takes the names of argRules out of the unconditional allow
// rules in kept and returns their conditional allow rules, for the names
// Docker's default allowed.
func argumentRules(kept []*seccomp.Syscall) []*seccomp.Syscall {
	var out []*seccomp.Syscall
	for _, name := range slices.Sorted(maps.Keys(argRules)) {
		if !takeUnconditional(kept, name) {
			continue
		}
		for _, args := range argRules[name] {
			out = append(out, &seccomp.Syscall{
				LinuxSyscall: specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: args},
				Comment:      "mcpsidecar: " + name + " only without TCP Fast Open or setuid/setgid bits",
			})
		}
	}
	return out
}

// takeUnconditional removes name from every allow rule without argument,
// capability or architecture conditions, and reports whether any had it.
func takeUnconditional(rules []*seccomp.Syscall, name string) bool {
	found := false
	for _, r := range rules {
		unconditional := len(r.Args) == 0 && r.Includes == nil && r.Excludes == nil
		if r.Action == specs.ActAllow && unconditional && slices.Contains(r.Names, name) {
			r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return n == name })
			found = true
		}
	}
	return found
}

// grantsNamespaces reports whether rule would allow clone/clone3 with any
// flags: Docker does so only under CAP_SYS_ADMIN.
func grantsNamespaces(rule *seccomp.Syscall, name string) bool {
	return (name == "clone" || name == "clone3") && len(rule.Args) == 0 &&
		rule.Includes != nil && slices.Contains(rule.Includes.Caps, "CAP_SYS_ADMIN")
}

// unconditionalNamespaceRule drops the CAP_SYS_ADMIN exclusion from the
// rules that restrict clone flags and refuse clone3, so they always apply.
func unconditionalNamespaceRule(rule *seccomp.Syscall) {
	if rule.Excludes == nil || !slices.Contains(rule.Excludes.Caps, "CAP_SYS_ADMIN") {
		return
	}
	if !slices.Contains(rule.Names, "clone") && !slices.Contains(rule.Names, "clone3") {
		return
	}
	rule.Excludes.Caps = slices.DeleteFunc(rule.Excludes.Caps, func(c string) bool { return c == "CAP_SYS_ADMIN" })
	if len(rule.Excludes.Caps) == 0 && len(rule.Excludes.Arches) == 0 && rule.Excludes.MinKernel == nil {
		rule.Excludes = nil
	}
}
