//go:build unix

package hold

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// readToken reads a release file, never through a link, never blocking on
// a FIFO, at most maxToken bytes.
func readToken(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, maxToken))
}
