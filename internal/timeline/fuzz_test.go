package timeline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzBuild feeds arbitrary bytes as each JSONL source: the workload
// controls much of what ends up in them, so the join must never panic,
// must always write valid JSONL and must always render the page.
func FuzzBuild(f *testing.F) {
	for _, name := range []string{FileAudit, FileDecisions, FileAgentTurns} {
		data, err := os.ReadFile(filepath.Join("testdata", "runs", "basic", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, data, data)
	}
	f.Add([]byte("{}\n{\"time\":\"2026-11-29T10:00:00Z\"}"), []byte("\x00\xff"), []byte("[]"))
	f.Fuzz(func(t *testing.T, audit, decisions, turns []byte) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{FileAudit: audit, FileDecisions: decisions, FileAgentTurns: turns,
			FileRunMetadata: []byte(minimalMeta)} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tl, err := Build(dir)
		if err != nil {
			t.Fatal(err)
		}
		var jl, page bytes.Buffer
		if err := tl.WriteJSONL(&jl); err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(jl.Bytes(), []byte("\n")), []byte("\n")) {
			if !json.Valid(line) {
				t.Fatalf("timeline.jsonl line %d is not JSON: %q", i+1, line)
			}
		}
		if err := tl.WriteHTML(&page); err != nil {
			t.Fatal(err)
		}
		if bytes.Count(page.Bytes(), []byte("<script")) != 1 {
			t.Fatal("report has more than its one script")
		}
	})
}
