//go:build linux

package timeline

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBuildDoesNotFollowLinks plants links and a FIFO where sources are
// expected: the workload owns the run directory, and the host must neither
// read through a link nor hang on a FIFO.
func TestBuildDoesNotFollowLinks(t *testing.T) {
	secret := writeFile(t, "secret")
	if err := os.WriteFile(secret, []byte(`{"time":"2026-11-29T10:00:00Z","kind":"tools/call","name":"LEAKED"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writeRun(t, map[string]string{FileRunMetadata: minimalMeta})
	if err := os.Symlink(secret, filepath.Join(dir, FileAudit)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, FileDecisions), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan *Timeline, 1)
	go func() {
		tl, err := Build(dir)
		if err != nil {
			t.Errorf("Build: %v", err)
		}
		done <- tl
	}()
	var tl *Timeline
	select {
	case tl = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Build hung on a FIFO")
	}
	if tl == nil {
		return
	}
	want := []Problem{
		{File: FileAudit, Message: "opening " + FileAudit + ": is a symbolic link, not followed"},
		{File: FileDecisions, Message: "opening " + FileDecisions + ": not a regular file"},
	}
	if diff := cmp.Diff(want, tl.Problems); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
	wantArtifacts := []Artifact{
		{Name: FileDecisions, Type: "other"},
		{Name: FileAudit, Type: "symlink"},
		{Name: FileRunMetadata, Type: "file", Size: int64(len(minimalMeta))},
	}
	if diff := cmp.Diff(wantArtifacts, tl.Artifacts); diff != "" {
		t.Errorf("artifacts mismatch (-want +got):\n%s", diff)
	}
	for _, e := range tl.Events {
		if e.Name == "LEAKED" {
			t.Errorf("read through a symbolic link: %+v", e)
		}
	}
}
