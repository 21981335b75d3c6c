package dockerx

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestBindSourceWithDrive: a Windows host's run directory starts with its
// drive, which the bind keeps (Docker Desktop takes it); on Linux and
// macOS the same text is a source with a ':' and is refused as before.
func TestBindSourceWithDrive(t *testing.T) {
	s := fullSpec()
	s.Mounts[0].Source = `C:\Users\ana\proj\.docker_sandbox\runs\run-1\agent`
	_, h, _, err := translate(s)
	if runtime.GOOS != "windows" {
		if err == nil || !strings.Contains(err.Error(), "contains ':' or ','") {
			t.Fatalf("on %s: got %v, want the ':' refusal", runtime.GOOS, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	want := s.Mounts[0].Source + ":" + s.Mounts[0].Target + ":rw"
	if s.Mounts[0].ReadOnly {
		want = s.Mounts[0].Source + ":" + s.Mounts[0].Target + ":ro"
	}
	if !slices.Contains(h.Binds, want) {
		t.Fatalf("binds %q lack %q", h.Binds, want)
	}
	s.Mounts[0].Source = `C:\Users\ana\a:b`
	if _, _, _, err := translate(s); err == nil || !strings.Contains(err.Error(), "contains ':' or ','") {
		t.Fatalf("a ':' after the drive: got %v, want the refusal", err)
	}
}
