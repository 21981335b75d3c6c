package timeline

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// golden compares got with testdata/golden/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// runDirs are the recorded runs in testdata/runs.
var runDirs = []string{"basic", "crash", "probe", "empty"}

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
			golden(t, name+".timeline.jsonl", jl.Bytes())
			golden(t, name+".story.txt", text.Bytes())
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
			golden(t, name+".report.html", page.Bytes())
		})
	}
}
