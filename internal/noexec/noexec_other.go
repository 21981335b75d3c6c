//go:build !linux

package noexec

import "errors"

var errLinux = errors.New("noexec mounts are a Linux interface")

// Held is a directory [Mount] made noexec (Linux only).
type Held struct{ Dir string }

// Mount is Linux-only.
func Mount(string) (*Held, error) { return nil, errLinux }

// Release is Linux-only.
func (*Held) Release() error { return nil }

// Check is Linux-only.
func Check(string) error { return errLinux }

// SeenIn is Linux-only.
func SeenIn([]byte, string) error { return errLinux }

// Sweep is Linux-only: there is nothing to sweep elsewhere.
func Sweep(string) ([]string, error) { return nil, nil }
