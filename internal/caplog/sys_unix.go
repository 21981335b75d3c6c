//go:build unix

package caplog

import "syscall"

// fsizeLimit is the process's file size limit (RLIMIT_FSIZE), if it has
// one.
func fsizeLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil || rl.Cur == ^uint64(0) {
		return 0, false
	}
	return rl.Cur, true
}
