// Package exitcode is the one table of mcpsidecar's process exit codes
// (docs/commands.md, "Exit codes") and the error that carries one, with an
// optional one-line hint for the user. The sandbox lifecycle
// (internal/sandbox) records the code in run-metadata.json; the command
// tree (internal/cli) exits with it.
package exitcode

import (
	"errors"
	"fmt"
)

// Exit codes, one table for every command.
const (
	OK          = 0   // success
	Runtime     = 1   // runtime error
	Usage       = 2   // usage error: bad flags or arguments
	InvalidSpec = 3   // the sandbox spec is invalid
	Violation   = 4   // the probe suite found an isolation violation
	Unavailable = 5   // environment unavailable: no Docker daemon, kernel lacks a required layer
	Untrusted   = 6   // a spec found in the working directory softens the sandbox and the user has not trusted it
	Interrupted = 130 // interrupted by a signal (128+SIGINT)
)

// Error carries an exit code and, optionally, a one-line hint.
type Error struct {
	Code int
	Err  error
	Hint string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// With wraps err so that the process exits with code; nil stays nil.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// WithHint wraps err with an exit code and a hint printed after the error.
func WithHint(code int, err error, hint string) error {
	return &Error{Code: code, Err: err, Hint: hint}
}

// Usagef reports a usage error (exit 2).
func Usagef(format string, args ...any) error {
	return With(Usage, fmt.Errorf(format, args...))
}

// Of returns the exit code an error maps to, and its hint: OK for nil,
// Runtime for an error that carries no code.
func Of(err error) (int, string) {
	if err == nil {
		return OK, ""
	}
	var ee *Error
	if errors.As(err, &ee) {
		return ee.Code, ee.Hint
	}
	return Runtime, ""
}
