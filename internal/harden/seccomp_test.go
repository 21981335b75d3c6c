//go:build linux

package harden

import (
	"encoding/binary"
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
	}
	if hasX32 {
		tests = append(tests, struct {
			name string
			spec filterSpec
			data []byte
			want int
		}{"x32 execve refused", shell, seccompData(auditArch, x32SyscallBit|520), errnoRet(unix.EPERM)})
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
	got := filterSpec{baseline: true, noSpawn: true, noUnix: true, noMPTCP: true}.deniedNames()
	for _, name := range []string{"execve", "execveat", "ptrace", "unshare", "mount", "keyctl", "io_uring_setup", "socketpair", "socket(AF_UNIX)", "socket(IPPROTO_MPTCP)", "clone(namespace flags)"} {
		if !slices.Contains(got, name) {
			t.Errorf("denied names %v lack %s", got, name)
		}
	}
	if got := (filterSpec{baseline: true}).deniedNames(); slices.Contains(got, "execve") {
		t.Errorf("shell-access filter denies execve: %v", got)
	}
}
