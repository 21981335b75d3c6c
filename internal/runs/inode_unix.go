//go:build unix

package runs

import (
	"io/fs"
	"syscall"
)

// Inode is the file's inode number, which changes when the file is
// replaced.
func Inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
