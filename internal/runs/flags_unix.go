//go:build unix

package runs

import "syscall"

// noFollow and nonBlock make opening a planted link fail and opening a
// planted FIFO return at once instead of blocking the harness.
const (
	noFollow = syscall.O_NOFOLLOW
	nonBlock = syscall.O_NONBLOCK
)
