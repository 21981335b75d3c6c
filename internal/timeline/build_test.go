package timeline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writeRun creates a run directory holding files.
func writeRun(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const minimalMeta = `{"schema":"mcpsidecar.run/v1","run_id":"r1","command":"run","started":"2026-11-29T10:00:00Z","finished":"2026-11-29T10:00:01Z"}`

func TestBuildReportsMalformedInput(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []Problem
	}{
		{"missing metadata", map[string]string{}, []Problem{{File: FileRunMetadata, Message: "missing"}}},
		{"metadata not JSON", map[string]string{FileRunMetadata: "{oops"},
			[]Problem{{File: FileRunMetadata, Message: "invalid JSON: invalid character 'o' looking for beginning of object key string"}}},
		{"audit line not an object", map[string]string{FileRunMetadata: minimalMeta, FileAudit: "[1,2]\n"},
			[]Problem{{File: FileAudit, Line: 1, Message: "invalid line skipped: not a JSON object"}}},
		{"audit unknown kind", map[string]string{FileRunMetadata: minimalMeta,
			FileAudit: `{"time":"2026-11-29T10:00:00Z","kind":"tools/list"}` + "\n"},
			[]Problem{{File: FileAudit, Line: 1, Message: `invalid line skipped: unknown kind "tools/list"`}}},
		{"audit bad time", map[string]string{FileRunMetadata: minimalMeta,
			FileAudit: `{"time":"yesterday","kind":"tools/call"}` + "\n"},
			[]Problem{{File: FileAudit, Line: 1, Message: `invalid line skipped: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`}}},
		{"decision neither allow nor deny", map[string]string{FileRunMetadata: minimalMeta,
			FileDecisions: `{"time":"2026-11-29T10:00:00Z","decision":"maybe"}` + "\n"},
			[]Problem{{File: FileDecisions, Line: 1, Message: `invalid line skipped: decision "maybe" is neither allow nor deny`}}},
		{"decision port not a number", map[string]string{FileRunMetadata: minimalMeta,
			FileDecisions: `{"time":"2026-11-29T10:00:00Z","decision":"deny","port":[443]}` + "\n"},
			[]Problem{{File: FileDecisions, Line: 1, Message: "invalid line skipped: port: want a number or a string, got [443]"}}},
		{"turn unknown kind", map[string]string{FileRunMetadata: minimalMeta,
			FileAgentTurns: `{"time":"2026-11-29T10:00:00Z","kind":"dance"}` + "\n"},
			[]Problem{{File: FileAgentTurns, Line: 1, Message: `invalid line skipped: unknown kind "dance"`}}},
		{"torn last line", map[string]string{FileRunMetadata: minimalMeta,
			FileDecisions: `{"time":"2026-11-29T10:00:00Z","decision":"deny"}` + "\n" + `{"time":"2026-11-29T1`},
			[]Problem{{File: FileDecisions, Line: 2, Message: "torn last line (no newline, 21 bytes) skipped: unexpected end of JSON input"}}},
		{"probe report missing for test-sandbox", map[string]string{FileRunMetadata: strings.Replace(minimalMeta, `"run"`, `"test-sandbox"`, 1)},
			[]Problem{{File: FileProbeReport, Message: "missing"}}},
		{"probe report without groups", map[string]string{FileRunMetadata: minimalMeta, FileProbeReport: `{"x":1}`},
			[]Problem{{File: FileProbeReport, Message: "no probe groups found"}}},
		{"probe group not an object", map[string]string{FileRunMetadata: minimalMeta, FileProbeReport: `[1]`},
			[]Problem{{File: FileProbeReport, Message: "group 0 is not an object"}, {File: FileProbeReport, Message: "no probe groups found"}}},
		{"policy not JSON", map[string]string{FileRunMetadata: minimalMeta, FileGatewayPol: `allow all`},
			[]Problem{{File: FileGatewayPol, Message: "invalid JSON: invalid character 'a' looking for beginning of value"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := Build(writeRun(t, tt.files))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(tt.want, tl.Problems); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildRejectsMissingDirectory(t *testing.T) {
	for _, dir := range []string{filepath.Join(t.TempDir(), "nope"), writeFile(t, "file")} {
		if _, err := Build(dir); err == nil {
			t.Errorf("Build(%s): got nil error, want one", dir)
		}
	}
}

func writeFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWriteReplacesPlantedLinks checks that a link planted at an output
// name is replaced, not written through.
func TestWriteReplacesPlantedLinks(t *testing.T) {
	dir := writeRun(t, map[string]string{FileRunMetadata: minimalMeta})
	victim := writeFile(t, "victim")
	for _, name := range []string{FileTimeline, FileReport} {
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(dir); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "x" {
		t.Errorf("victim overwritten through a link: %q", b)
	}
	for _, name := range []string{FileTimeline, FileReport} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			t.Errorf("%s: mode %v, want a regular file", name, fi.Mode())
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestTimelineJSONLIsValidAndVersioned(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "runs", "basic"))); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir); err != nil {
		t.Fatalf("Write: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, FileTimeline))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	var last time.Time
	for i, l := range lines {
		var e Event
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if e.Schema != Schema || e.Seq != i+1 {
			t.Errorf("line %d: schema %q seq %d, want %q %d", i+1, e.Schema, e.Seq, Schema, i+1)
		}
		if !e.Time.IsZero() {
			if e.Time.Before(last) {
				t.Errorf("line %d: time %v before previous %v", i+1, e.Time, last)
			}
			last = e.Time
		}
	}
}

// TestJoinLinksByCorrelation checks the links the story depends on, on the
// recorded basic run.
func TestJoinLinksByCorrelation(t *testing.T) {
	tl, err := Build(filepath.Join("testdata", "runs", "basic"))
	if err != nil {
		t.Fatal(err)
	}
	find := func(match func(e *Event) bool) *Event {
		for i := range tl.Events {
			if match(&tl.Events[i]) {
				return &tl.Events[i]
			}
		}
		t.Fatal("event not found")
		return nil
	}
	search := find(func(e *Event) bool { return e.Kind == KindToolCall && e.Name == "microsoft_code_sample_search" })
	learn := find(func(e *Event) bool { return e.Kind == KindEgress && e.Host == "learn.microsoft.com" })
	exfil := find(func(e *Event) bool { return e.Kind == KindEgress && e.Host == "exfil.example" })
	fetch := find(func(e *Event) bool { return e.Kind == KindToolCall && e.Name == "microsoft_docs_fetch" })
	meta := find(func(e *Event) bool { return e.Kind == KindEgress && e.Host == "metadata.google.internal" })
	local := find(func(e *Event) bool { return e.Kind == KindToolCall && e.Name == "get_html_element_name" })
	read := find(func(e *Event) bool { return e.Kind == KindResourceRead })
	readByAgent := find(func(e *Event) bool { return e.Kind == KindAgentToolCall && strings.HasPrefix(e.Name, "resources/read") })

	tests := []struct {
		name       string
		child      *Event
		wantParent int
		wantLink   string
	}{
		{"allowed upstream request under its tool call", learn, search.Seq, LinkCorrelation},
		{"denied attempt under the call that caused it", exfil, fetch.Seq, LinkCorrelation},
		{"egress with no tool call stays unlinked", meta, 0, ""},
		{"tool call with no egress is a root", local, 0, ""},
		{"ids differing only in case still join", readByAgent, read.Seq, LinkCorrelation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.child.Parent != tt.wantParent || tt.child.LinkedBy != tt.wantLink {
				t.Errorf("parent %d linked by %q, want %d %q", tt.child.Parent, tt.child.LinkedBy, tt.wantParent, tt.wantLink)
			}
		})
	}
}

func TestLinkByTimeRefusesAmbiguity(t *testing.T) {
	at := func(ms int) time.Time {
		return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	tests := []struct {
		name   string
		models []int // model request times (ms), each lasting 500ms
		egress int
		want   int // 1-based index into models of the expected parent, 0 for none
	}{
		{"inside one request", []int{1000}, 800, 1},
		{"outside every request", []int{1000}, 3000, 0},
		{"inside two overlapping requests", []int{1000, 1100}, 900, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev []Event
			for _, m := range tt.models {
				ev = append(ev, Event{Time: at(m), DurationMS: 500, Kind: KindModelRequest})
			}
			ev = append(ev, Event{Time: at(tt.egress), Kind: KindEgress, Decision: "allow"})
			sortEvents(ev)
			link(ev, Origins{})
			var got, want int
			for _, e := range ev {
				if e.Kind == KindEgress {
					got = e.Parent
				}
				if tt.want > 0 && e.Kind == KindModelRequest && e.Time.Equal(at(tt.models[tt.want-1])) {
					want = e.Seq
				}
			}
			if got != want {
				t.Errorf("parent %d, want %d", got, want)
			}
		})
	}
}

func TestNearestAnchorSplitsSharedIDs(t *testing.T) {
	// Two calls share one id (an agent that reuses its trace-id): each
	// egress decision hangs from the call nearest in time.
	at := func(ms int) time.Time {
		return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	ev := []Event{
		{Time: at(1000), Kind: KindToolCall, CorrelationID: "a"},
		{Time: at(5000), Kind: KindToolCall, CorrelationID: "a"},
		{Time: at(900), Kind: KindEgress, Decision: "allow", CorrelationID: "a", Scope: "sidecar/docs/search"},
		{Time: at(4800), Kind: KindEgress, Decision: "allow", CorrelationID: "a", Scope: "sidecar/docs/search"},
	}
	sortEvents(ev)
	link(ev, Origins{})
	got := map[time.Time]int{}
	for _, e := range ev {
		if e.Kind == KindEgress {
			got[e.Time] = e.Parent
		}
	}
	want := map[time.Time]int{at(900): 2, at(4800): 4} // seqs after sorting: 900, 1000, 4800, 5000
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parents mismatch (-want +got):\n%s", diff)
	}
}

// TestNoTimeLinkWhenModelRequestsCarryIDs: once the agent stamps its model
// requests, an unstamped connection during one is not hidden under it.
func TestNoTimeLinkWhenModelRequestsCarryIDs(t *testing.T) {
	at := func(ms int) time.Time {
		return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	ev := []Event{
		{Time: at(1000), DurationMS: 500, Kind: KindModelRequest, CorrelationID: "m1"},
		{Time: at(700), Kind: KindEgress, Decision: "allow", CorrelationID: "m1"},
		{Time: at(800), Kind: KindEgress, Decision: "allow", Host: "stray.example"},
	}
	sortEvents(ev)
	link(ev, Origins{})
	for _, e := range ev {
		if e.Host == "stray.example" && e.Parent != 0 {
			t.Errorf("stray connection linked to %d by %s, want unlinked", e.Parent, e.LinkedBy)
		}
	}
}

// TestHeldValueLineFails: a decision line whose answer reflected a held
// credential value (scrubbed) is an allowed request, and a failed event,
// its summary saying where the value was seen (issue 27).
func TestHeldValueLineFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "runs", "basic"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileDecisions)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	whole := b[:bytes.LastIndexByte(b, '\n')+1] // the fixture ends with a line cut short
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(whole)
	f.WriteString(`{"time":"2026-11-29T10:00:09Z","run_id":"r","client":"10.0.0.3:1","method":"GET","host":"echo.example","port":443,"resolved_ip":"1.2.3.4","decision":"allow","rule":"echo.example","reason":"","bytes_up":10,"bytes_down":20,"duration_ms":1,"correlation_id":"","credential":"reflected","held_value":"the value of OPENAI_API_KEY (as is) in the answer header X-Echo, scrubbed before the client read it"}` + "\n")
	f.Close()
	tl, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tl.Events {
		if e.Kind == KindEgress && e.Host == "echo.example" {
			if e.OK || !strings.Contains(e.Summary, "held credential reflected: the value of OPENAI_API_KEY (as is) in the answer header X-Echo") {
				t.Errorf("event %+v, want failed, its summary naming where the value was seen", e)
			}
			return
		}
	}
	t.Fatal("no event for the line")
}
