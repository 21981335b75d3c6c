package runs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRemove(t *testing.T) {
	base := t.TempDir()
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
