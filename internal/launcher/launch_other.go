//go:build !linux

package launcher

import (
	"errors"
	"io"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

// Options are a launch (see the Linux implementation).
type Options struct {
	Argv      []string
	Environ   []string
	Stderr    io.Writer
	ReportDir string
	Apply     func(harden.Policy) (harden.Report, error)
}

// Launch is Linux-only: Landlock and seccomp are Linux interfaces.
func Launch(Options) error {
	return errors.New("launch: the workload launcher runs only on Linux (Landlock and seccomp)")
}
