package harden

import (
	"errors"
	"fmt"
	"syscall"
)

// Actions a self-test [Check] can attempt. Each performs the real
// operation; an error that only the kernel's own logic returns after the
// syscall was let through (ESRCH for ptrace of a non-tracee, EINVAL for
// unshare in a multi-threaded process, ENODEV for a mount of an unknown
// filesystem type) counts as "ok": the layer under test did not stop it.
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
	ActMount       = "mount"        // mount an unknown filesystem type on /
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
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return OutcomeDenied
	case errors.Is(err, syscall.EFBIG):
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
