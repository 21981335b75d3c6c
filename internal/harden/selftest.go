//go:build linux

package harden

import (
	"errors"
	"fmt"
	"io"
	"net"
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
}

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
