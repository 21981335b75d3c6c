package runs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// scratchDir is t.TempDir that also cleans up under wine 8.0, whose
// missing file-disposition call makes t.TempDir's cleanup (os.RemoveAll)
// fail (docs/platforms.md): the remove tests run there (make wine-unit).
func scratchDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "runs-remove-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeByName(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}

func TestRemove(t *testing.T) {
	base := scratchDir(t)
	d, err := Create(base, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	must(t, err)
	must(t, d.Write("stdout.txt", []byte("x")))
	victim := filepath.Join(base, "victim")
	must(t, os.WriteFile(victim, []byte("keep"), 0o644))
	must(t, os.Symlink(victim, filepath.Join(d.Path, "link")))
	d.Close()
	must(t, os.Symlink(d.Path, filepath.Join(base, "run-link")))
	for _, bad := range []string{base, filepath.Join(base, "run-link"), filepath.Join(base, "run-missing")} {
		if err := Remove(bad); err == nil {
			t.Errorf("Remove(%s) succeeded", bad)
		}
	}
	must(t, Remove(d.Path))
	if _, err := os.Lstat(d.Path); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", d.Path, err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
		t.Errorf("link target touched: %q %v", b, err)
	}
}

// TestRemoveByName: the fallback removes a tree deepest first, read-only
// entries included, and removes a link inside as itself: the tree it
// points to, outside, is untouched.
func TestRemoveByName(t *testing.T) {
	base := scratchDir(t)
	outside := filepath.Join(base, "outside")
	must(t, os.MkdirAll(filepath.Join(outside, "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "deep", "keep.txt"), []byte("keep"), 0o644))
	run := filepath.Join(base, "run-1")
	must(t, os.MkdirAll(filepath.Join(run, "gateway", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(run, "gateway", "sub", "stdout.txt"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(run, "run-metadata.json"), []byte("{}"), 0o444))
	must(t, os.Symlink(outside, filepath.Join(run, "gateway", "dirlink")))
	must(t, os.Symlink(filepath.Join(outside, "deep", "keep.txt"), filepath.Join(run, "filelink")))

	must(t, removeByName(run))
	if _, err := os.Lstat(run); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", run, err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "deep", "keep.txt")); err != nil || string(b) != "keep" {
		t.Errorf("a link's target was touched: %q %v", b, err)
	}
}

func TestPrunable(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	base := t.TempDir()
	fresh := filepath.Join(base, "run-nometa-fresh")
	stale := filepath.Join(base, "run-nometa-stale")
	for _, p := range []string{fresh, stale} {
		must(t, os.Mkdir(p, 0o755))
	}
	must(t, os.Chtimes(fresh, now.Add(-time.Minute), now.Add(-time.Minute)))
	must(t, os.Chtimes(stale, now.Add(-48*time.Hour), now.Add(-48*time.Hour)))
	all := []Summary{
		{ID: "run-old", Meta: &Metadata{Finished: now.Add(-72 * time.Hour)}},
		{ID: "run-new", Meta: &Metadata{Finished: now.Add(-time.Hour)}},
		{ID: "run-kept", Meta: &Metadata{Finished: now.Add(-72 * time.Hour), Kept: true}},
		{ID: "run-nometa-fresh", Path: fresh},
		{ID: "run-nometa-stale", Path: stale},
	}
	prune, skipped := Prunable(all, now, 24*time.Hour)
	var ids []string
	for _, s := range prune {
		ids = append(ids, s.ID)
	}
	if want := []string{"run-old", "run-nometa-stale"}; !slices.Equal(ids, want) {
		t.Errorf("prune %v, want %v", ids, want)
	}
	if !strings.Contains(skipped["run-kept"], "runs rm run-kept") || !strings.Contains(skipped["run-nometa-fresh"], "still be going") || len(skipped) != 2 {
		t.Errorf("skipped %v", skipped)
	}
}
