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

// Actions a self-test [Check] can attempt. Each performs the real
// operation; an error that only the kernel's own logic returns after the
// syscall was let through (ESRCH for ptrace of a non-tracee, EINVAL for
// unshare in a multi-threaded process, ENOENT for a mount on a missing
// target) counts as "ok": the layer under test did not stop it.
const (
	ActRead        = "read"         // arg: file to read
	ActWrite       = "write"        // arg: file to create
	ActExec        = "exec"         // arg: program to run as `program version`
	ActWriteExec   = "write-exec"   // arg: dir; copy our own executable there and run it
	ActConnect     = "connect"      // arg: host:port, TCP
	ActBind        = "bind"         // arg: host:port, TCP via net.Listen (MPTCP first, Go's default)
	ActUnixSocket  = "unix-socket"  // socket(AF_UNIX)
	ActSocketpair  = "socketpair"   // socketpair(AF_UNIX)
	ActPtrace      = "ptrace"       // ptrace(PEEKDATA) on the parent
	ActUnshareUser = "unshare-user" // unshare(CLONE_NEWUSER)
	ActMount       = "mount"        // mount a tmpfs on a missing path
	ActKeyctl      = "keyctl"       // keyctl(GET_KEYRING_ID, session)
	ActIOUring     = "io-uring"     // io_uring_setup
	ActFsize       = "fsize"        // arg: file; write 128 KiB under a 64 KiB RLIMIT_FSIZE
)

// Outcomes of an attempt.
const (
	OutcomeOK     = "ok"
	OutcomeDenied = "denied" // EPERM or EACCES
	OutcomeEFBIG  = "efbig"  // the fsize limit held and the process lived
	OutcomeError  = "error"  // anything else
)

// EnvExecProbe is set for programs started by [ActExec] and
// [ActWriteExec], so a test binary exits at once instead of running tests.
const EnvExecProbe = "MCPSIDECAR_HARDEN_EXEC_PROBE"

// Check is one attempt and the outcome it must have.
type Check struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	Arg    string `json:"arg,omitempty"`
	Want   string `json:"want"`
}

// CheckResult is a check with what happened.
type CheckResult struct {
	Check
	Got   string `json:"got"`
	Error string `json:"error,omitempty"`
	Pass  bool   `json:"pass"`
}

// RunChecks attempts every check in order.
func RunChecks(checks []Check) []CheckResult {
	results := make([]CheckResult, 0, len(checks))
	for _, c := range checks {
		err := Try(c.Action, c.Arg)
		r := CheckResult{Check: c, Got: Outcome(err)}
		if err != nil {
			r.Error = err.Error()
		}
		r.Pass = r.Got == c.Want
		results = append(results, r)
	}
	return results
}

// Outcome classifies the error of [Try].
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return OutcomeDenied
	case errors.Is(err, unix.EFBIG):
		return OutcomeEFBIG
	}
	return OutcomeError
}

// Try attempts one action and returns its error (nil when it succeeded).
func Try(action, arg string) error {
	fn, ok := actions[action]
	if !ok {
		return fmt.Errorf("unknown self-test action %q", action)
	}
	return fn(arg)
}

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

func tryMount(string) error {
	return permittedIf(errnoOf(unix.Mount("none", "/nonexistent-mcpsidecar-selftest", "tmpfs", 0, "")), unix.ENOENT)
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
