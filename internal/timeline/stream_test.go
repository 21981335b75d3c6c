package timeline

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestParseLineIsBuildsParse: the watcher's events are the ones Build
// makes of the same lines (before linking, which Build adds).
func TestParseLineIsBuildsParse(t *testing.T) {
	dir := filepath.Join("testdata", "runs", "basic")
	tl, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]Event{}
	for _, e := range tl.Events {
		built[e.File+":"+strconv.Itoa(e.Line)] = e
	}
	n := 0
	for _, file := range LineFiles() {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			got, err := ParseLine(file, line, i+1)
			want, ok := built[file+":"+strconv.Itoa(i+1)]
			if !ok {
				if err == nil {
					t.Errorf("%s:%d: ParseLine accepts a line Build skipped", file, i+1)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s:%d: %v", file, i+1, err)
				continue
			}
			n++
			if got.Kind != want.Kind || got.CorrelationID != want.CorrelationID || !got.Time.Equal(want.Time) || got.File != want.File || got.Line != want.Line {
				t.Errorf("%s:%d: ParseLine %+v, Build %+v", file, i+1, got, want)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d lines compared", n)
	}
	if _, err := ParseLine("report.json", []byte("{}"), 1); err == nil {
		t.Error("ParseLine accepted a file that is not a line source")
	}
}
