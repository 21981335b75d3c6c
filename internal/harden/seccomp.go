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
	// openat2 takes its mode in memory, out of seccomp's sight: refusing
	// it keeps a setuid file from being created with it (see modeRules).
	// ENOSYS makes callers fall back to openat; Go never calls it.
	{"openat2", unix.SYS_OPENAT2, unix.ENOSYS},
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
	baseline  bool // baselineDenied, clone(2) namespace flags, the argument rules below
	noSpawn   bool // execve, execveat
	noUnix    bool // socket(AF_UNIX), socketpair
	noMPTCP   bool // socket(..., IPPROTO_MPTCP): Landlock's TCP rules do not see MPTCP
	noListen  bool // listen(2)
	noUDP     bool // socket(AF_INET/AF_INET6, SOCK_DGRAM, ...)
	noNetlink bool // socket(AF_NETLINK)
}

// deniedNames lists what the filter refuses, for the report.
func (f filterSpec) deniedNames() []string {
	var names []string
	for _, r := range f.plainRules() {
		names = append(names, r.name)
	}
	if f.baseline {
		names = append(names, "clone(namespace flags)", "socket(families other than unix, inet, inet6, netlink)",
			"socket(inet, types other than stream and dgram: raw, seqpacket...)", "socket(inet, protocols other than tcp, udp)",
			"sendto/sendmsg/sendmmsg(MSG_FASTOPEN)", "setsockopt(TCP_FASTOPEN, TCP_FASTOPEN_CONNECT)")
		for _, r := range modeRules() {
			names = append(names, r.name+"(S_ISUID|S_ISGID)")
		}
	}
	if f.noUnix {
		names = append(names, "socket(AF_UNIX)")
	}
	if f.noMPTCP {
		names = append(names, "socket(IPPROTO_MPTCP)")
	}
	if f.noUDP {
		names = append(names, "socket(inet, SOCK_DGRAM)")
	}
	if f.noNetlink {
		names = append(names, "socket(AF_NETLINK)")
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
	if f.noListen {
		rules = append(rules, syscallRule{"listen", unix.SYS_LISTEN, unix.EPERM})
	}
	return rules
}

func retErrno(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
}

var retAllow = bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}

// loadArgLow loads the low 32 bits of syscall argument i. The kernel reads
// int arguments (domain, protocol, flags, modes) from the low half only, so
// comparing the low half cannot be dodged by setting high bits.
func loadArgLow(i uint32) bpf.Instruction {
	return bpf.LoadAbsolute{Off: offArgs + 8*i, Size: 4}
}

// program assembles the filter. Layout: refuse foreign architectures (and
// x32), then one equality test per refused syscall, then the argument
// checks, each guarded by its syscall number and ending in its own
// return, then allow.
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
		prog = f.appendBaselineArgChecks(prog)
	}
	return append(prog, retAllow)
}

// appendBaselineArgChecks adds the argument rules every role carries.
func (f filterSpec) appendBaselineArgChecks(prog []bpf.Instruction) []bpf.Instruction {
	prog = appendGuarded(prog, unix.SYS_CLONE, refuseBits(0, cloneNamespaceFlags))
	// TCP Fast Open connects inside sendto/sendmsg on an unconnected
	// socket, where Landlock's connect hook never runs (landlock-lsm/linux
	// issue 41). The client side is off by sysctl in every container too.
	prog = appendGuarded(prog, unix.SYS_SENDTO, refuseBits(3, unix.MSG_FASTOPEN))
	prog = appendGuarded(prog, unix.SYS_SENDMSG, refuseBits(2, unix.MSG_FASTOPEN))
	prog = appendGuarded(prog, unix.SYS_SENDMMSG, refuseBits(3, unix.MSG_FASTOPEN))
	prog = appendGuarded(prog, unix.SYS_SETSOCKOPT, []bpf.Instruction{
		loadArgLow(1),
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_TCP, SkipTrue: 4},
		loadArgLow(2),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TCP_FASTOPEN, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.TCP_FASTOPEN_CONNECT, SkipTrue: 1},
		retErrno(unix.EPERM),
	})
	// A setuid or setgid file left in a directory the host can read lets
	// any local user run it as the container's user (the owner of every
	// run's record): neither a mode change nor a creation may set them.
	for _, r := range modeRules() {
		prog = appendGuarded(prog, r.nr, r.checks())
	}
	return prog
}

// refuseBits refuses the syscall with EPERM when argument arg has any of
// mask's bits set.
func refuseBits(arg, mask uint32) []bpf.Instruction {
	return []bpf.Instruction{
		loadArgLow(arg),
		bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: mask, SkipTrue: 1},
		retErrno(unix.EPERM),
	}
}

// setIDBits are the mode bits a file may never be given.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// openCreateFlags are the open flags that create a file (and so use the
// mode argument). __O_TMPFILE is 0x400000 on amd64 and arm64.
const openCreateFlags = unix.O_CREAT | 0x400000

// modeRule refuses setuid/setgid bits in the mode argument of a syscall
// that sets or creates with a mode; flagsArg >= 0 limits it to calls whose
// flags argument asks for creation.
type modeRule struct {
	name     string
	nr       uint32
	modeArg  uint32
	flagsArg int
}

func (r modeRule) checks() []bpf.Instruction {
	if r.flagsArg < 0 {
		return refuseBits(r.modeArg, setIDBits)
	}
	return append([]bpf.Instruction{
		loadArgLow(uint32(r.flagsArg)),
		bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: openCreateFlags, SkipTrue: 3},
	}, refuseBits(r.modeArg, setIDBits)...)
}

// modeRules are the mode-taking syscalls of every architecture plus this
// one's legacy calls (chmod, open, creat, mknod on amd64). openat2 passes
// its mode in memory, where seccomp cannot look: it is refused with ENOSYS
// in the baseline, and callers fall back to openat.
func modeRules() []modeRule {
	return append([]modeRule{
		{"fchmod", unix.SYS_FCHMOD, 1, -1},
		{"fchmodat", unix.SYS_FCHMODAT, 2, -1},
		{"fchmodat2", sysFchmodat2, 2, -1},
		{"mknodat", unix.SYS_MKNODAT, 2, -1},
		{"openat", unix.SYS_OPENAT, 3, 2},
	}, legacyModeRules...)
}

// sysFchmodat2 is fchmodat2's number on every architecture (Linux 6.6).
const sysFchmodat2 = 452

// Socket families, types and protocols the filter lets through; every
// other one (AF_PACKET, AF_VSOCK, AF_ALG, SOCK_RAW, SCTP...) is one more
// kernel surface, or a way around Landlock's TCP-only network rules.
const (
	sockTypeMask   = 0xf // SOCK_NONBLOCK and SOCK_CLOEXEC live above it
	ipprotoDefault = 0
)

// socketChecks: families other than unix, inet, inet6 and netlink are
// refused; unix and netlink when the policy says so; and inet sockets must
// be TCP (stream) or, unless noUDP, UDP (datagram).
func (f filterSpec) socketChecks() []bpf.Instruction {
	var checks []bpf.Instruction
	if f.baseline {
		checks = append(checks, loadArgLow(0))
		checks = append(checks, refuseUnlessIn([]uint32{unix.AF_INET, unix.AF_INET6, unix.AF_UNIX, unix.AF_NETLINK}, unix.EPERM)...)
	}
	if f.noUnix {
		checks = append(checks, loadArgLow(0),
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.AF_UNIX, SkipTrue: 1},
			retErrno(unix.EPERM))
	}
	if f.noNetlink {
		checks = append(checks, loadArgLow(0),
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.AF_NETLINK, SkipTrue: 1},
			retErrno(unix.EPERM))
	}
	if f.noMPTCP {
		// EPROTONOSUPPORT is what a kernel without MPTCP answers, so the Go
		// runtime falls back to plain TCP, which Landlock does restrict.
		checks = append(checks, loadArgLow(2),
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_MPTCP, SkipTrue: 1},
			retErrno(unix.EPROTONOSUPPORT))
	}
	if f.baseline {
		checks = append(checks, f.inetChecks()...)
	}
	return checks
}

// inetChecks allow non-inet sockets (already checked) and, for inet,
// stream sockets with protocol 0, TCP or MPTCP (refused above when
// Landlock's TCP rules are on), and datagram sockets with protocol 0 or
// UDP unless noUDP. ICMP "ping" sockets are datagram sockets with protocol
// ICMP, so they fall to the final refusal.
func (f filterSpec) inetChecks() []bpf.Instruction {
	stream := append([]bpf.Instruction{loadArgLow(2)},
		refuseUnlessIn([]uint32{ipprotoDefault, unix.IPPROTO_TCP, unix.IPPROTO_MPTCP}, unix.EPERM)...)
	stream = append(stream, retAllow)
	dgram := append([]bpf.Instruction{loadArgLow(2)},
		refuseUnlessIn([]uint32{ipprotoDefault, unix.IPPROTO_UDP}, unix.EPERM)...)
	dgram = append(dgram, retAllow)
	checks := []bpf.Instruction{
		loadArgLow(0),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET6, SkipTrue: 1},
		retAllow,
		loadArgLow(1),
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SOCK_STREAM, SkipTrue: uint8(len(stream))},
	}
	checks = append(checks, stream...)
	if !f.noUDP {
		checks = append(checks, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SOCK_DGRAM, SkipTrue: uint8(len(dgram))})
		checks = append(checks, dgram...)
	}
	return append(checks, retErrno(unix.EPERM))
}

// refuseUnlessIn returns errno unless the accumulator equals one of vals;
// a match jumps past the refusal.
func refuseUnlessIn(vals []uint32, errno unix.Errno) []bpf.Instruction {
	var out []bpf.Instruction
	for i, v := range vals {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(vals) - i)})
	}
	return append(out, retErrno(errno))
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
