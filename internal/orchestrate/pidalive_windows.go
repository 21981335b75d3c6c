//go:build windows

package orchestrate

import (
	"errors"

	"golang.org/x/sys/windows"
)

// stillActive is GetExitCodeProcess's code of a process that runs.
const stillActive = 259

// PIDAlive reports whether a process exists on this host: one that can
// be opened and has no exit code yet (a process this user may not open
// exists). The Alive of a GC on the host.
func PIDAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return errors.Is(err, windows.ERROR_ACCESS_DENIED)
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return true
	}
	return code == stillActive
}
