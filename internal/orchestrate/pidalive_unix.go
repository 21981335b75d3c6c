//go:build unix

package orchestrate

import (
	"errors"
	"syscall"
)

// PIDAlive reports whether a process exists on this host (signal 0 probes
// without delivering anything): the Alive of a GC on the host.
func PIDAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
