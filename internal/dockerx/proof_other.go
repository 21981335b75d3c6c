//go:build !linux

package dockerx

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// On a host that is not Linux the engine is never local: Docker Desktop,
// OrbStack and Colima run it in a Linux VM, whose process ids, namespaces
// and /proc are not this host's. So no process id the engine reports is
// proven or used here; what needs one (the old engines' route removal,
// readings of /proc/<pid>) reports that it cannot, as for any engine that
// is elsewhere.

// localityOf is never local off Linux.
func localityOf(context.Context, string) Locality {
	return Locality{Reason: "this host runs " + runtime.GOOS + ", not Linux: the engine runs in a VM or elsewhere"}
}

// kernelRelease has no Linux kernel to name off Linux.
func kernelRelease() (string, error) {
	return "", errors.New("this host runs " + runtime.GOOS + ", not a Linux kernel")
}

// Prove proves nothing off Linux: the engine's process ids are not this
// host's.
func Prove(_ string, pid int, _ time.Time) (Process, error) {
	return nil, fmt.Errorf("process %d: %w (this host runs %s)", pid, ErrNotOnThisHost, runtime.GOOS)
}
