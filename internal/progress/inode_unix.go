//go:build unix

package progress

import (
	"io/fs"
	"syscall"
)

// inode is the file's inode number, which changes when the file is
// replaced.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
