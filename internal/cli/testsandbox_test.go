package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompareBaseline(t *testing.T) {
	dir := t.TempDir()
	report := func(path, t07, t08 string) {
		body := `[{"id":"G09","title":"Network access","capabilities":[` +
			`{"id":"T07","title":"raw IP","shell":{},"tool":{},"alternates":{},"verdict":"` + t07 + `"},` +
			`{"id":"T08","title":"port","shell":{},"tool":{},"alternates":{},"verdict":"` + t08 + `"}]}]`
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Join(dir, "base.json")
	report(base, "violation", "pass")
	runDir := filepath.Join(dir, "run")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	report(filepath.Join(runDir, "report.json"), "pass", "pass")
	var errb bytes.Buffer
	compareBaseline(Streams{Err: &errb}, base, runDir)
	got := errb.String()
	for _, want := range []string{"baseline: G09/T07 violation -> pass", "baseline: 1 probe verdict(s) changed"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "T08") {
		t.Errorf("an unchanged probe was listed:\n%s", got)
	}
}
