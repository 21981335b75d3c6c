package spec

import (
	"encoding/json"
	"fmt"
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
	p := seccomp.DefaultProfile()
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
})

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
