package probe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// evidenceCap bounds an evidence string, as the seed's 500-character cap.
const evidenceCap = 500

func newResult(o Outcome, summary, evidence string) Result {
	if len(evidence) > evidenceCap {
		evidence = evidence[:evidenceCap] + "..."
	}
	return Result{Outcome: o, Summary: Redact(summary), Evidence: Redact(evidence)}
}

func allowed(summary, evidence string) Result { return newResult(Allowed, summary, evidence) }
func denied(summary, evidence string) Result  { return newResult(Denied, summary, evidence) }
func errored(summary, evidence string) Result { return newResult(Error, summary, evidence) }
func na(summary string) Result                { return newResult(NA, summary, "") }

// fromErr classifies an error from attempting what, with the seed's
// conventions: permission refusals and timeouts are Denied, an absent
// target is N/A, anything else is an Error.
func fromErr(what string, err error) Result {
	ev := err.Error()
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return denied(what+" was denied by runtime permissions.", ev)
	case errors.Is(err, syscall.EROFS):
		return denied(what+" was denied: read-only file system.", ev)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return denied(what+" timed out.", ev)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EAFNOSUPPORT):
		return denied(what+" was refused by the network.", ev)
	case errors.Is(err, fs.ErrNotExist):
		return na(what + ": the target does not exist.")
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP):
		return na(what + ": not supported by this kernel.")
	}
	return errored(fmt.Sprintf("%s failed unexpectedly.", what), ev)
}
