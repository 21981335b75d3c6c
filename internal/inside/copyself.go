package inside

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CopySelfCommand, run in the output holder (an exec), copies our binary
// into the launcher volume: the launcher a user's workload runs under
// (run --image) comes from our image, through the engine, never from a
// path the engine would resolve on its own host.
const CopySelfCommand = "copy-self"

// CopySelf copies the running binary to dst, a new file (never over one
// that exists) of mode 0555, and returns the SHA-256 of what it wrote, so
// the host can check it is the binary it built the image from.
func CopySelf(dst string) (string, error) {
	if !filepath.IsAbs(dst) {
		return "", fmt.Errorf("%s: the destination %q is not an absolute path", CopySelfCommand, dst)
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("opening this binary: %w", err)
	}
	defer self.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), self)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return "", fmt.Errorf("copying this binary to %s: %w", dst, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
