//go:build !unix

package runs

import (
	"io/fs"
	"os"
)

// NoFollow and NonBlock are zero: Windows has no O_NOFOLLOW or
// O_NONBLOCK. The run directory is opened as an [os.Root], which refuses
// a link that leads out of it, and the regular-file check after each
// open refuses anything that is not a file; a link that stays inside the
// run directory is followed. (Role code, which runs in the containers,
// is Linux-only and keeps the flags.)
const (
	NoFollow = 0
	NonBlock = 0
)

// allocated is the file's size: Windows reports no block count.
func allocated(info fs.FileInfo) int64 { return info.Size() }

// chown does nothing: Windows files have no Unix owner. The run
// directory lives under the user's own directory, whose ACL it inherits
// (docs/platforms.md).
func chown(*os.File, int, int) error { return nil }
