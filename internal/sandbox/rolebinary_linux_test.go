package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/binarch"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

// TestRoleBinary: with no role binary beside it (internal/rolebin has
// the role binary's cases), the image gets this binary when the engine
// runs it; else the full Linux binary of the engine's architecture that
// an older release archive keeps beside it (linux-<arch>/mcpsidecar),
// only when the engine runs that one; else this binary, which the check
// then refuses.
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
	if got, err := roleBinary(linux, "linux", runtime.GOARCH); err != nil || got.Path != linux {
		t.Errorf("a binary the engine runs: got %+v (%v)", got, err)
	}
	if got, err := roleBinary(host, "linux", runtime.GOARCH); err != nil || got.Path != host {
		t.Errorf("nothing beside it: got %+v (%v), want itself (the check refuses it)", got, err)
	}
	if got, err := roleBinary(host, "linux", ""); err != nil || got.Path != host {
		t.Errorf("engine's machine not read: got %+v (%v)", got, err)
	}
	beside := filepath.Join(dir, RoleBinaryDir(runtime.GOARCH), "mcpsidecar")
	if err := os.MkdirAll(filepath.Dir(beside), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linux, beside); err != nil {
		t.Fatal(err)
	}
	if got, err := roleBinary(host, "linux", runtime.GOARCH); err != nil || got.Path != beside {
		t.Errorf("the older archive's full Linux binary beside it: got %+v (%v), want %s", got, err, beside)
	}
	// One of another machine in the other's place is not taken.
	wrong := filepath.Join(dir, RoleBinaryDir(other), "mcpsidecar")
	if err := os.MkdirAll(filepath.Dir(wrong), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linux, wrong); err != nil {
		t.Fatal(err)
	}
	if got, err := roleBinary(host, "linux", other); err != nil || got.Path != host {
		t.Errorf("a %s binary in %s: got %+v (%v), want the host's (refused by the check)", runtime.GOARCH, RoleBinaryDir(other), got, err)
	}
	// A role binary this host binary was not stamped with (built
	// without make, as this test's) stops the run: exit 5, both named.
	role := filepath.Join(dir, RoleBinaryDir(runtime.GOARCH), "mcpsidecar-role")
	if err := os.Symlink(linux, role); err != nil {
		t.Fatal(err)
	}
	_, err = roleBinary(host, "linux", runtime.GOARCH)
	if code, _ := exitcode.Of(err); code != exitcode.Unavailable || !strings.Contains(err.Error(), role) || !strings.Contains(err.Error(), host) {
		t.Errorf("an unstamped role binary: %v (exit %d), want exit %d naming %s and %s", err, code, exitcode.Unavailable, role, host)
	}
}
