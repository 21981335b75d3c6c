package cli

import (
	"errors"
	"fmt"
)

// Exit codes, one table for every command (README.md).
const (
	ExitOK          = 0 // success
	ExitRuntime     = 1 // runtime error
	ExitUsage       = 2 // usage error: bad flags or arguments
	ExitInvalidSpec = 3 // the sandbox spec is invalid
	ExitViolation   = 4 // the probe suite found an isolation violation
	ExitUnavailable = 5 // environment unavailable: no Docker daemon, kernel lacks a required layer
)

// exitError carries an exit code and, optionally, a one-line hint for the user.
type exitError struct {
	code int
	err  error
	hint string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that [Run] exits with code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// withHint wraps err with an exit code and a hint printed after the error.
func withHint(code int, err error, hint string) error {
	return &exitError{code: code, err: err, hint: hint}
}

// usageErrorf reports a usage error (exit 2).
func usageErrorf(format string, args ...any) error {
	return withCode(ExitUsage, fmt.Errorf(format, args...))
}

// codeOf returns the exit code an error maps to, and its hint.
func codeOf(err error) (int, string) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.hint
	}
	return ExitRuntime, ""
}
