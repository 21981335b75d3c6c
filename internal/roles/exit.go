//go:build linux

package roles

import "github.com/mcpsidecar/mcpsidecar/internal/exitcode"

// Exit codes, one table for every command (internal/exitcode).
const (
	exitOK          = exitcode.OK
	exitRuntime     = exitcode.Runtime
	exitUsage       = exitcode.Usage
	exitViolation   = exitcode.Violation
	exitUnavailable = exitcode.Unavailable
)

// withCode wraps err so that [Run] exits with code.
func withCode(code int, err error) error { return exitcode.With(code, err) }

// withHint wraps err with an exit code and a hint printed after the error.
func withHint(code int, err error, hint string) error { return exitcode.WithHint(code, err, hint) }

// usageErrorf reports a usage error (exit 2).
func usageErrorf(format string, args ...any) error { return exitcode.Usagef(format, args...) }
