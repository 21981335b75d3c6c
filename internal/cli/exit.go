package cli

import (
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

// Exit codes, one table for every command (docs/commands.md; internal/exitcode).
const (
	ExitOK          = exitcode.OK          // success
	ExitRuntime     = exitcode.Runtime     // runtime error
	ExitUsage       = exitcode.Usage       // usage error: bad flags or arguments
	ExitInvalidSpec = exitcode.InvalidSpec // the sandbox spec is invalid
	ExitViolation   = exitcode.Violation   // the probe suite found an isolation violation
	ExitUnavailable = exitcode.Unavailable // environment unavailable: no Docker daemon, kernel lacks a required layer
)

// withCode wraps err so that [Run] exits with code.
func withCode(code int, err error) error { return exitcode.With(code, err) }

// withHint wraps err with an exit code and a hint printed after the error.
func withHint(code int, err error, hint string) error { return exitcode.WithHint(code, err, hint) }

// usageErrorf reports a usage error (exit 2).
func usageErrorf(format string, args ...any) error { return exitcode.Usagef(format, args...) }

// codeOf returns the exit code an error maps to, and its hint.
func codeOf(err error) (int, string) {
	if err == nil {
		return ExitRuntime, "" // as before: callers ask only about errors
	}
	return exitcode.Of(err)
}
