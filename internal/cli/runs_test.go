package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

func writeRun(t *testing.T, runsDir string, at time.Time, m runs.Metadata) string {
	t.Helper()
	d, err := runs.Create(runsDir, at)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m.RunID = d.ID
	if err := d.WriteJSON(runs.MetadataFile, m); err != nil {
		t.Fatal(err)
	}
	if err := d.Write("stdout.txt", []byte("answer\n")); err != nil {
		t.Fatal(err)
	}
	return d.ID
}

func TestRunsListAndShow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exit := 0
	okID := writeRun(t, dir, t0, runs.Metadata{Schema: runs.MetadataSchema, Command: "doctor", Started: t0, Finished: t0.Add(3 * time.Second),
		Image:        runs.Image{Tag: "mcpsidecar:abc", Method: "reused"},
		Phases:       []runs.Phase{{Name: "gateway", DurationMS: 12.5, OK: true}},
		Containers:   []runs.Container{{Role: "agent", Name: "sandbox-agent-x", ExitCode: &exit, PeakMemoryBytes: 9e6}},
		Verdict:      runs.Verdict{OK: true, Checks: []runs.Check{{Name: "agent --check exited 0", OK: true}}},
		Degradations: []string{"old engine"}})
	failID := writeRun(t, dir, t0.Add(time.Minute), runs.Metadata{Schema: runs.MetadataSchema, Command: "run", ExitCode: 1, Started: t0, Finished: t0, Kept: true})
	if err := os.Mkdir(filepath.Join(dir, "run-broken"), 0o755); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := run(t, "runs", "list", "--runs-dir", dir)
	if code != 0 {
		t.Fatalf("runs list: %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "run-broken") || !strings.HasPrefix(lines[2], failID) || !strings.HasSuffix(lines[2], "kept (runs rm "+failID+")") || strings.Join(strings.Fields(lines[3]), " ") != okID+" doctor ok 0 3s" {
		t.Errorf("runs list:\n%s", out)
	}

	code, _, stderr = run(t, "runs", "show", "run-2026-01-02-03-0", "--runs-dir", dir)
	if code != ExitUsage || !strings.Contains(stderr, "ambiguous") {
		t.Errorf("ambiguous prefix: code %d, stderr %q", code, stderr)
	}
	code, out, stderr = run(t, "runs", "show", okID[:len(okID)-1], "--runs-dir", dir)
	if code != 0 {
		t.Fatalf("runs show: %d %s", code, stderr)
	}
	for _, want := range []string{"run " + okID + " (doctor), exit code 0", "image mcpsidecar:abc (reused)", "degraded: old engine",
		"verdict: ok", "gateway", "12.5", "sandbox-agent-x", "9.0 MB", filepath.Join(dir, okID, "stdout.txt")} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run(t, "runs", "show", "--json", filepath.Join(dir, failID), "--runs-dir", dir)
	var doc struct {
		Schema string `json:"schema"`
		Run    runDoc `json:"run"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.Schema != runsShowSchema || doc.Run.Metadata == nil ||
		doc.Run.Metadata.RunID != failID || doc.Run.Metadata.ExitCode != 1 || !strings.Contains(out, `"timeline": {`) {
		t.Errorf("runs show --json by path: code %d, %q", code, out)
	}
}
