//go:build unix

package runs

import (
	"io/fs"
	"os"
	"syscall"
)

// NoFollow and NonBlock make opening a planted link fail and opening a
// planted FIFO return at once instead of blocking the harness: every
// package that opens a file a container may have planted uses them in
// place of syscall's names, which Windows lacks.
const (
	NoFollow = syscall.O_NOFOLLOW
	NonBlock = syscall.O_NONBLOCK
)

// allocated is the disk space a file takes: its blocks, which a sparse
// file cannot understate.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// chown gives f to uid:gid.
func chown(f *os.File, uid, gid int) error { return f.Chown(uid, gid) }
