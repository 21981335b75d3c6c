package timeline

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// hostileRun is a recorded run whose records carry line breaks (\n, \r\n,
// tab, U+2028) followed by made-up timeline rows, and agent turns with
// times before the run's start and after its end (red team, finding 5).
var hostileRun = filepath.Join("testdata", "runs", "hostile")

// TestRenderKeepsRecordStringsOnOneLine: every string from a record
// stays on its row; a forged row after a line break is printed escaped,
// on the line of the record that carried it.
func TestRenderKeepsRecordStringsOnOneLine(t *testing.T) {
	tl, err := Build(hostileRun)
	if err != nil {
		t.Fatal(err)
	}
	// Probe text is the probe container's record: the same rule.
	tl.Probe = &ProbeReport{Groups: []ProbeGroup{{ID: "G1", Title: "group\nFORGED-GROUP", Probes: []Probe{
		{ID: "P1", Title: "probe\r\nFORGED-PROBE", Verdict: "pass\n  +0.9s FORGED-VERDICT", Reason: "r\n    !! FORGED-REASON"}}}}}
	for _, color := range []bool{false, true} {
		var buf bytes.Buffer
		if err := tl.Render(&buf, RenderOptions{Color: color}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.ContainsAny(out, "\r\t\u2028\u2029") {
			t.Errorf("color=%v: a raw line break or tab is in the story:\n%s", color, out)
		}
		forged := 0
		for _, l := range strings.Split(out, "\n") {
			plain := strings.NewReplacer(ansiRed, "", ansiGreen, "", ansiDim, "", ansiReset, "").Replace(l)
			forged += strings.Count(plain, "FORGED")
			i := strings.Index(plain, "FORGED")
			if i < 0 {
				continue
			}
			// The forged text sits after an escaped break, on the line of
			// the record that carried it, never at a line's start.
			if before := plain[:i]; !strings.Contains(before, `\n`) && !strings.Contains(before, `\t`) && !strings.Contains(before, `\u2028`) {
				t.Errorf("color=%v: a forged text is not behind an escaped break: %q", color, l)
			}
		}
		if forged != 11 {
			t.Errorf("color=%v: %d forged texts in the story, want every record's (11); the test no longer exercises them:\n%s", color, forged, out)
		}
	}
}

// TestTimesComeFromTheHarness: the run's start and end are
// run-metadata.json's; an agent turn claiming a time months before the
// start or after the end is shown at that bound, marked, and listed.
func TestTimesComeFromTheHarness(t *testing.T) {
	tl, err := Build(hostileRun)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(5 * time.Second)
	if !tl.Started.Equal(start) || !tl.Finished.Equal(end) {
		t.Fatalf("run bounds %s .. %s, want run-metadata.json's %s .. %s", tl.Started, tl.Finished, start, end)
	}
	claims := 0
	for _, e := range tl.Events {
		if e.Time.Before(start) || e.Time.After(end) {
			t.Errorf("event %d (%s line %d) at %s, outside the run", e.Seq, e.File, e.Line, e.Time)
		}
		if strings.Contains(e.Summary, "outside the run: the record's claim") {
			claims++
			if e.Source != SourceAgent {
				t.Errorf("event %d of %s marked as a claim", e.Seq, e.Source)
			}
		}
	}
	if claims != 2 {
		t.Errorf("%d events marked as a claimed time, want 2", claims)
	}
	var problems []string
	for _, p := range tl.Problems {
		problems = append(problems, p.String())
	}
	for _, want := range []string{
		"agent-turns.jsonl:1: recorded time 2026-01-01T00:00:00Z is 8026h0m0s before the run's start",
		"agent-turns.jsonl:3: recorded time 2027-01-01T00:00:00Z is 733h59m55s after the run's end",
	} {
		if !strings.Contains(strings.Join(problems, "\n"), want) {
			t.Errorf("problems %q lack %q", problems, want)
		}
	}
	var buf bytes.Buffer
	if err := tl.Render(&buf, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "    +0.000s     harness  run started") {
		t.Errorf("the harness's start is not the origin:\n%s", buf.String())
	}
}

// TestNoHarnessStartPrefersOwnRecords: without run-metadata.json the
// origin is the earliest gateway or sidecar record, not the agent's claim,
// and a problem says the times are the records' own.
func TestNoHarnessStartPrefersOwnRecords(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(FileAgentTurns, `{"time":"2026-01-01T00:00:00Z","kind":"error","error":"early"}`+"\n")
	write(FileDecisions, `{"time":"2026-12-01T10:00:03Z","method":"CONNECT","host":"a.test","port":443,"decision":"allow"}`+"\n")
	tl, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 1, 10, 0, 3, 0, time.UTC); !tl.Started.Equal(want) {
		t.Errorf("origin %s, want the gateway's record %s", tl.Started, want)
	}
	found := false
	for _, p := range tl.Problems {
		found = found || strings.Contains(p.Message, "no start time from the harness")
	}
	if !found {
		t.Errorf("no problem says the origin is a record's time: %v", tl.Problems)
	}
}

// TestReportRowsCannotBeForged: in report.html each event is one element
// of the timeline; a line break in a record stays inside its row.
func TestReportRowsCannotBeForged(t *testing.T) {
	tl, err := Build(hostileRun)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := tl.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	rows, top := 0, 0
	z := html.NewTokenizer(&page)
	for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
		if tt != html.StartTagToken {
			continue
		}
		tok := z.Token()
		for _, a := range tok.Attr {
			if tok.Data == "div" && a.Key == "class" && strings.HasPrefix(a.Val, "ev ") {
				rows++
			}
		}
	}
	for _, e := range tl.Events {
		if e.Parent == 0 {
			top++
		}
	}
	if rows != top {
		t.Errorf("report.html has %d timeline rows for %d top-level events", rows, top)
	}
}
