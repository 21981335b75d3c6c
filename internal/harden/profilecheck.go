//go:build linux

package harden

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// RoleSyscalls are the syscalls the roles (static Go binaries: sidecar,
// gateway, agent, probe) make, including [Apply]'s own. Measured with
// `strace -f -c` over the role workload test (HTTP server and client, TLS,
// name lookup, file writes and renames, GC) and over Apply, then widened by
// the variants the Go runtime and net package pick on other paths
// (epoll_wait, writev, recvmsg, shutdown...). TestRoleSyscallsSuffice runs
// that workload under a filter allowing only these, killing on anything
// else.
var RoleSyscalls = []string{
	// runtime: memory, threads, signals, time
	"mmap", "munmap", "madvise", "clone", "futex", "gettid", "getpid", "getppid", "tgkill",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "sched_yield",
	"sched_getaffinity", "nanosleep", "clock_gettime", "arch_prctl", "uname",
	"prlimit64", "getrlimit", "exit", "exit_group", "getrandom",
	"getuid", "geteuid", "getgid", "getegid",
	// network poller and sockets
	"epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_wait", "eventfd2", "pipe2",
	"socket", "connect", "bind", "listen", "accept4", "getsockname", "getpeername",
	"setsockopt", "getsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown",
	// files
	"openat", "read", "write", "writev", "pread64", "pwrite64", "close", "fcntl", "fstat",
	"newfstatat", "lseek", "getdents64", "readlinkat", "mkdirat", "unlinkat", "renameat",
	"fsync", "fdatasync",
	// Apply
	"prctl", "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
}

// CheckDockerProfile loads a Docker seccomp profile the way the daemon does
// for a container with every capability dropped, and checks that it
// refuses by default, allows everything in [RoleSyscalls], and allows
// nothing in mustDeny, not even under argument conditions. It returns every
// problem found.
func CheckDockerProfile(profile []byte, mustDeny []string) error {
	noCaps := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	loaded, err := seccomp.LoadProfile(string(profile), noCaps)
	if err != nil {
		return fmt.Errorf("loading seccomp profile: %w", err)
	}
	var errs []error
	if loaded.DefaultAction == specs.ActAllow || loaded.DefaultAction == specs.ActLog {
		errs = append(errs, fmt.Errorf("default action %s lets unlisted syscalls through", loaded.DefaultAction))
	}
	allowed := allowedNames(loaded)
	if missing := slices.DeleteFunc(slices.Clone(RoleSyscalls), func(n string) bool { return allowed[n] }); len(missing) > 0 {
		errs = append(errs, fmt.Errorf("profile refuses syscalls the roles need: %s", strings.Join(missing, ", ")))
	}
	if leaked := slices.DeleteFunc(slices.Clone(mustDeny), func(n string) bool { return !allowed[n] }); len(leaked) > 0 {
		errs = append(errs, fmt.Errorf("profile allows syscalls on the deny list: %s", strings.Join(leaked, ", ")))
	}
	return errors.Join(errs...)
}

// allowedNames are the names some allow rule lets through, with or
// without argument conditions.
func allowedNames(s *specs.LinuxSeccomp) map[string]bool {
	allowed := map[string]bool{}
	for _, rule := range s.Syscalls {
		if rule.Action != specs.ActAllow {
			continue
		}
		for _, n := range rule.Names {
			allowed[n] = true
		}
	}
	return allowed
}
