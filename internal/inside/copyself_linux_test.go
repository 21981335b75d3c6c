package inside

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestCopySelf: the copy is this binary, mode 0555, its digest returned;
// an existing file is never written over, and a relative path is refused.
func TestCopySelf(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "mcpsidecar")
	sum, err := CopySelf(dst)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(self)
	if got := sha256.Sum256(copied); got != want || sum != hex.EncodeToString(want[:]) {
		t.Errorf("digest %s; the copy is not this binary", sum)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o555 {
		t.Errorf("mode %v, want 0555", fi.Mode().Perm())
	}
	if _, err := CopySelf(dst); err == nil {
		t.Error("an existing file was written over")
	}
	if _, err := CopySelf("relative/mcpsidecar"); err == nil {
		t.Error("a relative destination was accepted")
	}
}
