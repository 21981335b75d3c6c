//go:build linux

package harden

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var actions = map[string]func(string) error{
	ActRead:        func(a string) error { _, err := os.ReadFile(a); return err },
	ActWrite:       func(a string) error { return os.WriteFile(a, []byte("x"), 0o600) },
	ActExec:        runProgram,
	ActWriteExec:   writeExec,
	ActConnect:     tryConnect,
	ActBind:        tryBind,
	ActUnixSocket:  func(string) error { return closeFD(unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)) },
	ActSocketpair:  trySocketpair,
	ActPtrace:      tryPtrace,
	ActUnshareUser: tryUnshareUser,
	ActMount:       tryMount,
	ActKeyctl:      tryKeyctl,
	ActIOUring:     tryIOUring,
	ActFsize:       tryFsize,

	ActTFOSendto:       tryTFOSendto,
	ActTFOConnect:      tryTFOConnect,
	ActChmodSetuid:     withFile(func(p string, _ int) error { return unix.Fchmodat(unix.AT_FDCWD, p, unix.S_ISUID|0o755, 0) }),
	ActChmodSetgid:     withFile(func(p string, _ int) error { return unix.Fchmodat(unix.AT_FDCWD, p, unix.S_ISGID|0o755, 0) }),
	ActFchmodSetuid:    withFile(func(_ string, fd int) error { return unix.Fchmod(fd, unix.S_ISUID|0o755) }),
	ActFchmodat2Setuid: withFile(tryFchmodat2),
	ActCreateSetuid:    tryCreateSetuid,
	ActMknodSetuid:     tryMknodSetuid,
	ActListenUnbound:   tryListenUnbound,
	ActUDPSocket:       func(string) error { return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)) },
	ActPingSocket:      func(string) error { return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP)) },
	ActNetlink:         func(string) error { return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)) },
	ActRawSocket:       func(string) error { return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)) },
	ActLookup:          func(a string) error { _, err := net.DefaultResolver.LookupHost(context.Background(), a); return err },
	ActPacketSocket: func(string) error {
		return closeFD(unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))))
	},
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func closeFD(fd int, err error) error {
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

func runProgram(path string) error {
	cmd := exec.Command(path, "version")
	cmd.Env = append(os.Environ(), EnvExecProbe+"=1")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run()
}

// writeExec is the "run what you downloaded" attack: a copy of a known
// good program, written where the role may write, then executed.
func writeExec(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own executable: %w", err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return fmt.Errorf("reading own executable: %w", err)
	}
	dst := filepath.Join(dir, "harden-selftest-exec")
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return fmt.Errorf("writing the copy (the write itself must work): %v", err)
	}
	defer os.Remove(dst)
	return runProgram(dst)
}

func tryConnect(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func tryBind(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

func trySocketpair(string) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	unix.Close(fds[0])
	return unix.Close(fds[1])
}

func tryPtrace(string) error {
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, uintptr(os.Getppid()), 0, 0, 0, 0)
	return permittedIf(errno, unix.ESRCH)
}

func tryUnshareUser(string) error {
	return permittedIf(errnoOf(unix.Unshare(unix.CLONE_NEWUSER)), unix.EINVAL)
}

// tryMount asks for a filesystem type that does not exist, on "/": once
// past seccomp and the capability check the kernel answers ENODEV, so
// nothing is ever mounted, even when the attempt is allowed.
func tryMount(string) error {
	return permittedIf(errnoOf(unix.Mount("none", "/", "mcpsidecar-selftest-nofs", 0, "")), unix.ENODEV)
}

func tryKeyctl(string) error {
	_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	return err
}

func tryIOUring(string) error {
	var params [120]byte // struct io_uring_params, zeroed
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if errno != 0 {
		return errno
	}
	return unix.Close(int(fd))
}

// tryFsize shows what a Go role does at the fsize limit: with SIGXFSZ
// ignored the write fails with EFBIG and the process carries on. The limit
// is lowered for this process only and restored after.
func tryFsize(path string) error {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		return err
	}
	lim := unix.Rlimit{Cur: 64 << 10, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		return fmt.Errorf("lowering RLIMIT_FSIZE: %w", err)
	}
	defer unix.Setrlimit(unix.RLIMIT_FSIZE, &old)
	defer os.Remove(path)
	return os.WriteFile(path, make([]byte, 128<<10), 0o600)
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// permittedIf maps the errno the kernel gives once a syscall got through
// to success, and returns any other errno.
func permittedIf(errno, permitted unix.Errno) error {
	if errno == 0 || errno == permitted {
		return nil
	}
	return errno
}

// tryTFOSendto connects with TCP Fast Open: sendto(MSG_FASTOPEN) on a
// socket never connected sends the SYN (and the data, when the peer has a
// cookie), so the attempt succeeds once the handshake does.
func tryTFOSendto(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("parsing %q: %w", addr, err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	return unix.Sendto(fd, []byte("x"), unix.MSG_FASTOPEN|unix.MSG_NOSIGNAL, sa)
}

func tryTFOConnect(string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1)
}

// setidFile is the file the setuid attempts create in their directory.
const setidFile = "harden-selftest-setid"

// withFile creates a plain 0755 file in dir, runs fn on its path and
// descriptor, and removes it.
func withFile(fn func(path string, fd int) error) func(string) error {
	return func(dir string) error {
		path := filepath.Join(dir, setidFile)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
		if err != nil {
			return fmt.Errorf("creating the file (the write itself must work): %v", err)
		}
		defer os.Remove(path)
		defer f.Close()
		return fn(path, int(f.Fd()))
	}
}

func tryFchmodat2(path string, _ int) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	dirfd := unix.AT_FDCWD
	_, _, errno := unix.Syscall6(sysFchmodat2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), unix.S_ISUID|0o755, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func tryCreateSetuid(dir string) error {
	path := filepath.Join(dir, setidFile)
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, unix.S_ISUID|0o755)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	return unix.Close(fd)
}

func tryMknodSetuid(dir string) error {
	path := filepath.Join(dir, setidFile)
	if err := unix.Mknodat(unix.AT_FDCWD, path, unix.S_IFREG|unix.S_ISUID|0o755, 0); err != nil {
		return err
	}
	return os.Remove(path)
}

// tryListenUnbound listens on a socket that was never bound: the kernel
// binds an ephemeral port on the spot, without asking Landlock.
func tryListenUnbound(string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Listen(fd, 1)
}
