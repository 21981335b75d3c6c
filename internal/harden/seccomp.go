//go:build linux

package harden

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The filter is assembled here with golang.org/x/net/bpf rather than
// github.com/elastic/go-seccomp-bpf: that library lets every syscall of a
// foreign architecture through (its arch check jumps to the default action),
// so on x86_64 an i386 execve (int 0x80, nr 11) would bypass a no-spawn
// filter. Ours refuses every foreign-arch syscall and the x32 ABI.

// seccomp_data offsets (linux/seccomp.h).
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// x32SyscallBit marks x32-ABI syscall numbers on x86_64.
const x32SyscallBit = 0x40000000

// cloneNamespaceFlags are the clone(2) flags that create namespaces.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// syscallRule refuses one syscall by number with errno.
type syscallRule struct {
	name  string
	nr    uint32
	errno unix.Errno
}

// baselineDenied is [LayerSyscallDeny]. Each entry answers a known escape
// or privilege path that no role needs: debugging other processes
// (ptrace, process_vm_*, pidfd_getfd), new namespaces (unshare, setns),
// mounts (mount*, open_tree, fs*, pivot_root), kernel keyrings (keyctl,
// add_key, request_key), io_uring (which issues socket/open operations
// that seccomp never sees), eBPF, userfaultfd (a race-widening primitive in
// kernel exploits), perf, file handles ("shocker" container escape) and
// kernel modules. Docker's profile refuses most of these too; this layer
// holds when a container runs with seccomp=unconfined or on the host.
var baselineDenied = []syscallRule{
	{"ptrace", unix.SYS_PTRACE, unix.EPERM},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV, unix.EPERM},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, unix.EPERM},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD, unix.EPERM},
	{"unshare", unix.SYS_UNSHARE, unix.EPERM},
	{"setns", unix.SYS_SETNS, unix.EPERM},
	{"mount", unix.SYS_MOUNT, unix.EPERM},
	{"umount2", unix.SYS_UMOUNT2, unix.EPERM},
	{"pivot_root", unix.SYS_PIVOT_ROOT, unix.EPERM},
	{"open_tree", unix.SYS_OPEN_TREE, unix.EPERM},
	{"move_mount", unix.SYS_MOVE_MOUNT, unix.EPERM},
	{"fsopen", unix.SYS_FSOPEN, unix.EPERM},
	{"fsconfig", unix.SYS_FSCONFIG, unix.EPERM},
	{"fsmount", unix.SYS_FSMOUNT, unix.EPERM},
	{"fspick", unix.SYS_FSPICK, unix.EPERM},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR, unix.EPERM},
	{"keyctl", unix.SYS_KEYCTL, unix.EPERM},
	{"add_key", unix.SYS_ADD_KEY, unix.EPERM},
	{"request_key", unix.SYS_REQUEST_KEY, unix.EPERM},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, unix.EPERM},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER, unix.EPERM},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER, unix.EPERM},
	{"bpf", unix.SYS_BPF, unix.EPERM},
	{"userfaultfd", unix.SYS_USERFAULTFD, unix.EPERM},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, unix.EPERM},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, unix.EPERM},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, unix.EPERM},
	{"init_module", unix.SYS_INIT_MODULE, unix.EPERM},
	{"finit_module", unix.SYS_FINIT_MODULE, unix.EPERM},
	{"delete_module", unix.SYS_DELETE_MODULE, unix.EPERM},
	{"kexec_load", unix.SYS_KEXEC_LOAD, unix.EPERM},
	// clone3 passes its flags in memory, where seccomp cannot look; ENOSYS
	// makes runtimes fall back to clone(2), whose flags are checked below.
	{"clone3", unix.SYS_CLONE3, unix.ENOSYS},
}

// spawnDenied is [LayerNoSpawn]: no new program can start, so a
// compromised role cannot run a dropped binary or a shell.
var spawnDenied = []syscallRule{
	{"execve", unix.SYS_EXECVE, unix.EPERM},
	{"execveat", unix.SYS_EXECVEAT, unix.EPERM},
}

// filterSpec says which parts the seccomp filter carries.
type filterSpec struct {
	baseline bool // baselineDenied, and clone(2) with namespace flags
	noSpawn  bool // execve, execveat
	noUnix   bool // socket(AF_UNIX), socketpair
	noMPTCP  bool // socket(..., IPPROTO_MPTCP): Landlock's TCP rules do not see MPTCP
}

// deniedNames lists what the filter refuses, for the report.
func (f filterSpec) deniedNames() []string {
	var names []string
	for _, r := range f.plainRules() {
		names = append(names, r.name)
	}
	if f.baseline {
		names = append(names, "clone(namespace flags)")
	}
	if f.noUnix {
		names = append(names, "socket(AF_UNIX)")
	}
	if f.noMPTCP {
		names = append(names, "socket(IPPROTO_MPTCP)")
	}
	return names
}

func (f filterSpec) plainRules() []syscallRule {
	var rules []syscallRule
	if f.baseline {
		rules = append(rules, baselineDenied...)
	}
	if f.noSpawn {
		rules = append(rules, spawnDenied...)
	}
	if f.noUnix {
		rules = append(rules, syscallRule{"socketpair", unix.SYS_SOCKETPAIR, unix.EPERM})
	}
	return rules
}

func retErrno(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
}

var retAllow = bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}

// loadArgLow loads the low 32 bits of syscall argument i. The kernel reads
// int arguments (domain, protocol, clone flags) from the low half only, so
// comparing the low half cannot be dodged by setting high bits.
func loadArgLow(i uint32) bpf.Instruction {
	return bpf.LoadAbsolute{Off: offArgs + 8*i, Size: 4}
}

// program assembles the filter. Layout: refuse foreign architectures (and
// x32), then one equality test per refused syscall, then the argument
// checks for socket and clone, each ending in its own return, then allow.
func (f filterSpec) program() []bpf.Instruction {
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		retErrno(unix.EPERM),
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if hasX32 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			retErrno(unix.EPERM))
	}
	for _, r := range f.plainRules() {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: r.nr, SkipTrue: 1}, retErrno(r.errno))
	}
	prog = appendGuarded(prog, unix.SYS_SOCKET, f.socketChecks())
	if f.baseline {
		prog = appendGuarded(prog, unix.SYS_CLONE, []bpf.Instruction{
			loadArgLow(0),
			bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: cloneNamespaceFlags, SkipTrue: 1},
			retErrno(unix.EPERM),
		})
	}
	return append(prog, retAllow)
}

func (f filterSpec) socketChecks() []bpf.Instruction {
	var checks []bpf.Instruction
	if f.noUnix {
		checks = append(checks, loadArgLow(0),
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.AF_UNIX, SkipTrue: 1},
			retErrno(unix.EPERM))
	}
	if f.noMPTCP {
		// EPROTONOSUPPORT is what a kernel without MPTCP answers, so the Go
		// runtime falls back to plain TCP, which Landlock does restrict.
		checks = append(checks, loadArgLow(2),
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_MPTCP, SkipTrue: 1},
			retErrno(unix.EPROTONOSUPPORT))
	}
	return checks
}

// appendGuarded appends body, run only when the syscall number (still in
// the accumulator) is nr, followed by an allow. An empty body adds nothing.
func appendGuarded(prog []bpf.Instruction, nr uint32, body []bpf.Instruction) []bpf.Instruction {
	if len(body) == 0 {
		return prog
	}
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: uint8(len(body) + 1)})
	prog = append(prog, body...)
	return append(prog, retAllow)
}

// loadSeccomp installs prog on every thread of the process at once
// (SECCOMP_FILTER_FLAG_TSYNC): the Go runtime is multi-threaded, and a
// filter on one thread only would leave the others free to execve.
func loadSeccomp(prog []bpf.Instruction) error {
	if auditArch == 0 {
		return fmt.Errorf("seccomp filter: architecture %s is not supported", runtime.GOARCH)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("assembling seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}

	// no_new_privs must be set on the thread that installs the filter;
	// TSYNC then carries both to every other thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("installing seccomp filter: %w", errno)
	}
	if tid != 0 {
		return fmt.Errorf("installing seccomp filter: thread %d could not be synchronised", tid)
	}
	return nil
}
