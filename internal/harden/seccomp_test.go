//go:build linux

package harden

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData builds a seccomp_data buffer for bpf.VM. The VM loads words
// big-endian, so each 32-bit field is stored big-endian at the offset the
// kernel's little-endian layout gives it (args: low half at 16+8i).
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[offArgs+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[offArgs+8*i+4:], uint32(a>>32))
	}
	return b
}

const (
	auditArchI386 = 0x40000003
	i386Execve    = 11
)

func errnoRet(e unix.Errno) int { return int(unix.SECCOMP_RET_ERRNO | uint32(e)) }

const allow = int(unix.SECCOMP_RET_ALLOW)

func TestFilterProgram(t *testing.T) {
	full := filterSpec{baseline: true, noSpawn: true, noUnix: true, noMPTCP: true}
	shell := filterSpec{baseline: true}
	// agent is what a role that serves nothing and needs no UDP carries.
	agent := filterSpec{baseline: true, noSpawn: true, noUnix: true, noMPTCP: true, noListen: true, noUDP: true, noNetlink: true}
	const (
		s06755 = unix.S_ISUID | unix.S_ISGID | 0o755
		s04755 = unix.S_ISUID | 0o755
		s02755 = unix.S_ISGID | 0o755
	)
	tests := []struct {
		name string
		spec filterSpec
		data []byte
		want int
	}{
		{"read allowed", full, seccompData(auditArch, unix.SYS_READ), allow},
		{"execve refused", full, seccompData(auditArch, unix.SYS_EXECVE), errnoRet(unix.EPERM)},
		{"execveat refused", full, seccompData(auditArch, unix.SYS_EXECVEAT), errnoRet(unix.EPERM)},
		{"execve allowed with shell access", shell, seccompData(auditArch, unix.SYS_EXECVE), allow},
		{"foreign arch refused (i386 execve)", shell, seccompData(auditArchI386, i386Execve), errnoRet(unix.EPERM)},
		{"foreign arch refused even for read", full, seccompData(auditArchI386, 3), errnoRet(unix.EPERM)},
		{"AF_UNIX socket refused", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0), errnoRet(unix.EPERM)},
		{"AF_UNIX with high bits still refused", full, seccompData(auditArch, unix.SYS_SOCKET, 1<<32|unix.AF_UNIX, unix.SOCK_STREAM, 0), errnoRet(unix.EPERM)},
		{"AF_UNIX allowed without no-unix", shell, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0), allow},
		{"TCP socket allowed", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0), allow},
		{"UDP socket allowed (DNS)", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM, 0), allow},
		{"MPTCP socket refused as unsupported", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), errnoRet(unix.EPROTONOSUPPORT)},
		{"socketpair refused", full, seccompData(auditArch, unix.SYS_SOCKETPAIR, unix.AF_UNIX), errnoRet(unix.EPERM)},
		{"thread clone allowed", full, seccompData(auditArch, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_THREAD|unix.CLONE_SIGHAND|unix.CLONE_FS|unix.CLONE_FILES), allow},
		{"clone with new user ns refused", full, seccompData(auditArch, unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), errnoRet(unix.EPERM)},
		{"clone3 answers ENOSYS", full, seccompData(auditArch, unix.SYS_CLONE3), errnoRet(unix.ENOSYS)},
		{"ptrace refused", shell, seccompData(auditArch, unix.SYS_PTRACE), errnoRet(unix.EPERM)},
		{"io_uring_setup refused", shell, seccompData(auditArch, unix.SYS_IO_URING_SETUP), errnoRet(unix.EPERM)},
		{"landlock_restrict_self allowed", full, seccompData(auditArch, unix.SYS_LANDLOCK_RESTRICT_SELF), allow},
		// TCP Fast Open.
		{"sendto flags 0 allowed", agent, seccompData(auditArch, unix.SYS_SENDTO, 3, 0, 1, 0), allow},
		{"sendto MSG_NOSIGNAL allowed", agent, seccompData(auditArch, unix.SYS_SENDTO, 3, 0, 1, unix.MSG_NOSIGNAL), allow},
		{"sendto MSG_FASTOPEN|MSG_NOSIGNAL refused", shell, seccompData(auditArch, unix.SYS_SENDTO, 3, 0, 1, unix.MSG_FASTOPEN|unix.MSG_NOSIGNAL), errnoRet(unix.EPERM)},
		{"sendmsg flags 0 allowed", agent, seccompData(auditArch, unix.SYS_SENDMSG, 3, 0, 0), allow},
		{"sendmsg MSG_FASTOPEN refused", shell, seccompData(auditArch, unix.SYS_SENDMSG, 3, 0, unix.MSG_FASTOPEN), errnoRet(unix.EPERM)},
		{"sendmmsg MSG_FASTOPEN refused", shell, seccompData(auditArch, unix.SYS_SENDMMSG, 3, 0, 1, unix.MSG_FASTOPEN), errnoRet(unix.EPERM)},
		{"sendmmsg flags 0 allowed", shell, seccompData(auditArch, unix.SYS_SENDMMSG, 3, 0, 1, 0), allow},
		{"setsockopt TCP_NODELAY allowed", agent, seccompData(auditArch, unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_TCP, unix.TCP_NODELAY), allow},
		{"setsockopt SO_REUSEADDR allowed", agent, seccompData(auditArch, unix.SYS_SETSOCKOPT, 3, unix.SOL_SOCKET, unix.SO_REUSEADDR), allow},
		{"setsockopt optname 30 at SOL_SOCKET allowed", agent, seccompData(auditArch, unix.SYS_SETSOCKOPT, 3, unix.SOL_SOCKET, unix.TCP_FASTOPEN_CONNECT), allow},
		{"setsockopt TCP_FASTOPEN_CONNECT refused", shell, seccompData(auditArch, unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT), errnoRet(unix.EPERM)},
		{"setsockopt TCP_FASTOPEN refused", shell, seccompData(auditArch, unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_TCP, unix.TCP_FASTOPEN), errnoRet(unix.EPERM)},
		{"setsockopt TCP_FASTOPEN with high bits refused", shell, seccompData(auditArch, unix.SYS_SETSOCKOPT, 3, 1<<32|unix.IPPROTO_TCP, 1<<40|unix.TCP_FASTOPEN), errnoRet(unix.EPERM)},
		// setuid/setgid bits.
		{"fchmodat 0755 allowed", agent, seccompData(auditArch, unix.SYS_FCHMODAT, 3, 0, 0o755), allow},
		{"fchmodat 01777 allowed", agent, seccompData(auditArch, unix.SYS_FCHMODAT, 3, 0, 0o1777), allow},
		{"fchmodat 04755 refused", shell, seccompData(auditArch, unix.SYS_FCHMODAT, 3, 0, s04755), errnoRet(unix.EPERM)},
		{"fchmodat 02755 refused", shell, seccompData(auditArch, unix.SYS_FCHMODAT, 3, 0, s02755), errnoRet(unix.EPERM)},
		{"fchmod 0600 allowed", shell, seccompData(auditArch, unix.SYS_FCHMOD, 3, 0o600), allow},
		{"fchmod 06755 refused", shell, seccompData(auditArch, unix.SYS_FCHMOD, 3, s06755), errnoRet(unix.EPERM)},
		{"fchmodat2 0755 allowed", shell, seccompData(auditArch, sysFchmodat2, 3, 0, 0o755, 0), allow},
		{"fchmodat2 04755 refused", shell, seccompData(auditArch, sysFchmodat2, 3, 0, s04755, 0), errnoRet(unix.EPERM)},
		{"mknodat S_IFREG|04755 refused", shell, seccompData(auditArch, unix.SYS_MKNODAT, 3, 0, unix.S_IFREG|s04755, 0), errnoRet(unix.EPERM)},
		{"openat O_CREAT 0644 allowed", shell, seccompData(auditArch, unix.SYS_OPENAT, 3, 0, unix.O_CREAT|unix.O_WRONLY, 0o644), allow},
		{"openat O_CREAT 04755 refused", shell, seccompData(auditArch, unix.SYS_OPENAT, 3, 0, unix.O_CREAT|unix.O_WRONLY, s04755), errnoRet(unix.EPERM)},
		{"openat O_TMPFILE 02755 refused", shell, seccompData(auditArch, unix.SYS_OPENAT, 3, 0, unix.O_TMPFILE|unix.O_RDWR, s02755), errnoRet(unix.EPERM)},
		{"openat without O_CREAT ignores the mode", shell, seccompData(auditArch, unix.SYS_OPENAT, 3, 0, unix.O_RDONLY, s06755), allow},
		{"openat2 answers ENOSYS", shell, seccompData(auditArch, unix.SYS_OPENAT2), errnoRet(unix.ENOSYS)},
		// listen.
		{"listen refused for a role that serves nothing", agent, seccompData(auditArch, unix.SYS_LISTEN, 3, 128), errnoRet(unix.EPERM)},
		{"listen allowed for a serving role", full, seccompData(auditArch, unix.SYS_LISTEN, 3, 128), allow},
		// Socket families, types, protocols.
		{"TCP socket allowed without UDP", agent, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0), allow},
		{"TCP6 socket, IPPROTO_TCP allowed", agent, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP), allow},
		{"UDP socket refused", agent, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0), errnoRet(unix.EPERM)},
		{"UDP6 socket, IPPROTO_UDP refused", agent, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP), errnoRet(unix.EPERM)},
		{"UDP-Lite socket refused", agent, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE), errnoRet(unix.EPERM)},
		{"UDP socket allowed for the gateway", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP), allow},
		{"UDP-Lite refused even with UDP", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE), errnoRet(unix.EPERM)},
		{"ICMP ping socket refused", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), errnoRet(unix.EPERM)},
		{"ICMPv6 ping socket refused", agent, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6), errnoRet(unix.EPERM)},
		{"raw socket refused", shell, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP), errnoRet(unix.EPERM)},
		{"SCTP seqpacket refused", shell, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_SEQPACKET, unix.IPPROTO_SCTP), errnoRet(unix.EPERM)},
		{"SCTP stream refused", shell, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_SCTP), errnoRet(unix.EPERM)},
		{"packet socket refused", shell, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0x300), errnoRet(unix.EPERM)},
		{"vsock refused", shell, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0), errnoRet(unix.EPERM)},
		{"netlink refused", agent, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE), errnoRet(unix.EPERM)},
		{"netlink allowed when not refused", full, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE), allow},
		{"MPTCP allowed without Landlock TCP rules", shell, seccompData(auditArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), allow},
	}
	if hasX32 {
		tests = append(tests, struct {
			name string
			spec filterSpec
			data []byte
			want int
		}{"x32 execve refused", shell, seccompData(auditArch, x32SyscallBit|520), errnoRet(unix.EPERM)})
	}
	for _, r := range legacyModeRules {
		flags := uint64(unix.O_CREAT | unix.O_WRONLY)
		for _, mode := range []uint64{0o755, s04755, s02755} {
			args := make([]uint64, 4)
			args[r.modeArg] = mode
			if r.flagsArg >= 0 {
				args[r.flagsArg] = flags
			}
			want := allow
			if mode&setIDBits != 0 {
				want = errnoRet(unix.EPERM)
			}
			tests = append(tests, struct {
				name string
				spec filterSpec
				data []byte
				want int
			}{fmt.Sprintf("%s %#o", r.name, mode), shell, seccompData(auditArch, r.nr, args...), want})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm, err := bpf.NewVM(tt.spec.program())
			if err != nil {
				t.Fatalf("program does not verify: %v", err)
			}
			got, err := vm.Run(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestDeniedNames(t *testing.T) {
	got := filterSpec{baseline: true, noSpawn: true, noUnix: true, noMPTCP: true, noListen: true, noUDP: true, noNetlink: true}.deniedNames()
	for _, name := range []string{"execve", "execveat", "ptrace", "unshare", "mount", "keyctl", "io_uring_setup", "socketpair", "socket(AF_UNIX)",
		"socket(IPPROTO_MPTCP)", "clone(namespace flags)", "listen", "socket(inet, SOCK_DGRAM)", "socket(AF_NETLINK)",
		"sendto/sendmsg/sendmmsg(MSG_FASTOPEN)", "fchmodat(S_ISUID|S_ISGID)", "openat2"} {
		if !slices.Contains(got, name) {
			t.Errorf("denied names %v lack %s", got, name)
		}
	}
	if got := (filterSpec{baseline: true}).deniedNames(); slices.Contains(got, "execve") {
		t.Errorf("shell-access filter denies execve: %v", got)
	}
}
