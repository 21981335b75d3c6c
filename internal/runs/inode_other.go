//go:build !unix

package runs

import "io/fs"

// Inode is 0 off Unix (no inode in fs.FileInfo): a replaced file is then
// noticed only when it is shorter than what was read.
func Inode(fs.FileInfo) uint64 { return 0 }
