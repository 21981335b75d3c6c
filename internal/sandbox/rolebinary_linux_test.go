package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/binarch"
)

// TestRoleBinary: the image gets this binary when the engine runs it;
// else the Linux binary of the engine's architecture that a release
// archive keeps beside it (linux-<arch>/mcpsidecar), only when the engine
// runs that one; else this binary, which the check then refuses.
func TestRoleBinary(t *testing.T) {
	linux, err := os.Executable() // this test binary: a Linux ELF of runtime.GOARCH
	if err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	dir := t.TempDir()
	host := filepath.Join(dir, "mcpsidecar") // a host build the engine cannot run
	if err := os.WriteFile(host, []byte("not an executable of any engine's machine"), 0o755); err != nil {
		t.Fatal(err)
	}
	if binarch.CheckFile(linux, "linux", runtime.GOARCH) != nil || binarch.CheckFile(host, "linux", runtime.GOARCH) == nil {
		t.Fatal("the fixtures are not what the test needs")
	}
	if got := roleBinary(linux, "linux", runtime.GOARCH); got != linux {
		t.Errorf("a binary the engine runs: got %s", got)
	}
	if got := roleBinary(host, "linux", runtime.GOARCH); got != host {
		t.Errorf("nothing beside it: got %s, want itself (the check refuses it)", got)
	}
	if got := roleBinary(host, "linux", ""); got != host {
		t.Errorf("engine's machine not read: got %s", got)
	}
	beside := filepath.Join(dir, RoleBinaryDir(runtime.GOARCH), "mcpsidecar")
	if err := os.MkdirAll(filepath.Dir(beside), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linux, beside); err != nil {
		t.Fatal(err)
	}
	if got := roleBinary(host, "linux", runtime.GOARCH); got != beside {
		t.Errorf("the archive's Linux binary beside it: got %s, want %s", got, beside)
	}
	// One of another machine in the other's place is not taken.
	wrong := filepath.Join(dir, RoleBinaryDir(other), "mcpsidecar")
	if err := os.MkdirAll(filepath.Dir(wrong), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linux, wrong); err != nil {
		t.Fatal(err)
	}
	if got := roleBinary(host, "linux", other); got != host {
		t.Errorf("a %s binary in %s: got %s, want the host's (refused by the check)", runtime.GOARCH, RoleBinaryDir(other), got)
	}
}
