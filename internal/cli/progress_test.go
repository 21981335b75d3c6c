package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// TestRunEvents: --events streams the run's events as timeline JSON lines,
// to a file or to stdout, from the first phase on (here a run that stops
// at the preflight: DOCKER_HOST points nowhere); a bad --events stops
// before anything starts.
func TestRunEvents(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	t.Setenv("OPENAI_API_KEY", "sk-test")
	runsDir := filepath.Join(dir, "runs")

	t.Run("bad destination", func(t *testing.T) {
		code, _, stderr := run(t, "run", "--runs-dir", runsDir, "--events", filepath.Join(dir, "no", "such", "dir.jsonl"))
		if code != ExitUsage || !strings.Contains(stderr, "--events "+filepath.Join(dir, "no", "such", "dir.jsonl")+": no such file or directory") {
			t.Errorf("code %d, stderr %q", code, stderr)
		}
	})
	t.Run("stdout twice", func(t *testing.T) {
		code, _, stderr := run(t, "run", "--runs-dir", runsDir, "--events", "-", "--json")
		if code != ExitUsage || !strings.Contains(stderr, "--events - and --json both write to stdout") {
			t.Errorf("code %d, stderr %q", code, stderr)
		}
	})
	check := func(t *testing.T, stream string) {
		t.Helper()
		var phases []string
		for i, line := range strings.Split(strings.TrimSpace(stream), "\n") {
			var e timeline.Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("line %d %q: %v", i+1, line, err)
			}
			if e.Schema != timeline.Schema || e.Seq != i+1 || e.Kind != timeline.KindPhase {
				t.Errorf("line %d: %+v", i+1, e)
			}
			phases = append(phases, e.Name)
			if e.Name == "preflight" && (e.OK || e.Error == "") {
				t.Errorf("the failed preflight streamed as %+v", e)
			}
		}
		if strings.Join(phases, ",") != "spec,preflight" {
			t.Errorf("phases streamed: %v, want spec,preflight", phases)
		}
	}
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(dir, "events.jsonl")
		code, _, stderr := run(t, "run", "--runs-dir", runsDir, "--events", path)
		if code != ExitUnavailable {
			t.Fatalf("code %d, stderr %q", code, stderr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		check(t, string(b))
	})
	t.Run("stdout", func(t *testing.T) {
		code, stdout, stderr := run(t, "run", "--runs-dir", runsDir, "--events", "-", "--quiet")
		if code != ExitUnavailable {
			t.Fatalf("code %d, stderr %q", code, stderr)
		}
		check(t, stdout)
	})
}
