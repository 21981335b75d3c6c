package timeline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// runDirs are the recorded runs in testdata/runs.
var runDirs = []string{"basic", "crash", "probe", "empty", "doctor", "testsandbox", "unreachable", "hostile", "reusedid"}

func TestGoldenJoin(t *testing.T) {
	for _, name := range runDirs {
		t.Run(name, func(t *testing.T) {
			tl, err := Build(filepath.Join("testdata", "runs", name))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			var jl, text bytes.Buffer
			if err := tl.WriteJSONL(&jl); err != nil {
				t.Fatalf("WriteJSONL: %v", err)
			}
			if err := tl.Render(&text, RenderOptions{}); err != nil {
				t.Fatalf("Render: %v", err)
			}
			testutil.Golden(t, filepath.Join("testdata", "golden", name+".timeline.jsonl"), jl.Bytes())
			testutil.Golden(t, filepath.Join("testdata", "golden", name+".story.txt"), text.Bytes())
		})
	}
}

func TestGoldenReport(t *testing.T) {
	for _, name := range runDirs {
		t.Run(name, func(t *testing.T) {
			tl, err := Build(filepath.Join("testdata", "runs", name))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			var page bytes.Buffer
			if err := tl.WriteHTML(&page); err != nil {
				t.Fatalf("WriteHTML: %v", err)
			}
			testutil.Golden(t, filepath.Join("testdata", "golden", name+".report.html"), page.Bytes())
		})
	}
}

func TestRenderOptions(t *testing.T) {
	tl, err := Build(filepath.Join("testdata", "runs", "basic"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("color marks denials", func(t *testing.T) {
		var out bytes.Buffer
		if err := tl.Render(&out, RenderOptions{Color: true}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out.Bytes(), []byte(ansiRed+"gateway  DENY CONNECT exfil.example:443")) {
			t.Errorf("denial not painted red:\n%s", out.String())
		}
	})
	t.Run("json is the joined data", func(t *testing.T) {
		var out bytes.Buffer
		if err := tl.Render(&out, RenderOptions{JSON: true}); err != nil {
			t.Fatal(err)
		}
		var got Timeline
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("--json output is not JSON: %v", err)
		}
		if got.Schema != Schema || len(got.Events) != len(tl.Events) || len(got.Problems) != len(tl.Problems) || got.Policy == nil {
			t.Errorf("--json: schema %q, %d events, %d problems, policy %v; want %q, %d, %d, set",
				got.Schema, len(got.Events), len(got.Problems), got.Policy, Schema, len(tl.Events), len(tl.Problems))
		}
	})
	t.Run("timeline only", func(t *testing.T) {
		var out bytes.Buffer
		if err := tl.Render(&out, RenderOptions{TimelineOnly: true}); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "\nTimeline") || strings.Contains(out.String(), "Phases") {
			t.Errorf("TimelineOnly printed more than the timeline:\n%s", out.String())
		}
	})
	t.Run("write errors are returned", func(t *testing.T) {
		if err := tl.Render(failingWriter{}, RenderOptions{}); err == nil {
			t.Error("Render to a failing writer: got nil error")
		}
	})
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }
