package follow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

const (
	allowLine = `{"time":"2026-12-07T00:00:01Z","client":"172.30.1.3:40110","method":"CONNECT","host":"learn.microsoft.com","port":443,"decision":"allow","rule":".microsoft.com","correlation_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`
	denyLine  = `{"time":"2026-12-07T00:00:02Z","client":"172.30.1.3:40112","method":"CONNECT","host":"exfil.example","port":443,"decision":"deny","reason":"host exfil.example is not in allowed_domains","correlation_id":"4bf92f3577b34da6a3ce929d0e0e4736","scope":"sidecar/learn/microsoft_docs_fetch"}`
	fullLine  = `{"time":"2026-12-07T00:00:03Z","decision":"deny","log_full":true,"reason":"the decision log is full; this line and every later one are refused"}`
	callStart = `{"time":"2026-12-07T00:00:00.5Z","kind":"call_start","name":"microsoft_docs_fetch","correlation_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`
)

// collect polls r and returns what it read.
func collect(r *Run, final bool) []Item {
	var out []Item
	r.Poll(final, func(it Item) { out = append(out, it) })
	return out
}

func newRunDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, rec := range Records {
		if err := os.Mkdir(filepath.Join(dir, rec.Role), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func decisions(dir string) string { return filepath.Join(dir, "gateway", timeline.FileDecisions) }

// TestGrowingRecord: lines appended between polls come out once each, in
// order, with their numbers; half a line waits for its newline; the
// log-full marker is an event; a malformed line is a problem, and the
// lines after it still come.
func TestGrowingRecord(t *testing.T) {
	dir := newRunDir(t)
	r := NewRun(dir, nil)
	if got := collect(r, false); len(got) != 0 {
		t.Fatalf("nothing written, read %v", got)
	}
	appendTo(t, decisions(dir), allowLine+"\n"+denyLine[:40])
	got := collect(r, false)
	if len(got) != 1 || got[0].Event == nil || got[0].Event.Host != "learn.microsoft.com" || got[0].Event.Line != 1 {
		t.Fatalf("after one line and a half: %+v", got)
	}
	appendTo(t, decisions(dir), denyLine[40:]+"\n{not json\n"+fullLine+"\n")
	got = collect(r, false)
	if len(got) != 3 {
		t.Fatalf("want the denial, a problem and the log-full marker, got %d items: %+v", len(got), got)
	}
	if e := got[0].Event; e == nil || !e.Denied() || e.Host != "exfil.example" || e.Line != 2 {
		t.Errorf("the completed half line: %+v", got[0])
	}
	if p := got[1].Problem; p == nil || p.Line != 3 || !strings.Contains(p.Message, "invalid line skipped") {
		t.Errorf("the malformed line: %+v", got[1])
	}
	if e := got[2].Event; e == nil || e.Kind != timeline.KindLogFull || e.Line != 4 {
		t.Errorf("the log-full marker: %+v", got[2])
	}
	if again := collect(r, false); len(again) != 0 {
		t.Errorf("a poll with nothing new read %+v", again)
	}
}

// TestTornLastLine: at the run's end, a last line without its newline is
// parsed when whole and reported when not.
func TestTornLastLine(t *testing.T) {
	for _, tc := range []struct {
		name, tail string
		wantEvent  bool
	}{
		{"whole", allowLine, true},
		{"cut", allowLine[:30], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRunDir(t)
			appendTo(t, decisions(dir), tc.tail)
			r := NewRun(dir, nil)
			if got := collect(r, false); len(got) != 0 {
				t.Fatalf("a line without newline came before the end: %+v", got)
			}
			got := collect(r, true)
			if len(got) != 1 {
				t.Fatalf("final poll: %+v", got)
			}
			if tc.wantEvent != (got[0].Event != nil) {
				t.Errorf("got %+v, want an event: %v", got[0], tc.wantEvent)
			}
			if !tc.wantEvent && !strings.Contains(got[0].Problem.Message, "torn last line") {
				t.Errorf("problem %q does not say torn", got[0].Problem.Message)
			}
		})
	}
}

// TestReplacedRecord: a record replaced (rotated) or truncated under the
// tail is said once and followed again from its start.
func TestReplacedRecord(t *testing.T) {
	dir := newRunDir(t)
	appendTo(t, decisions(dir), allowLine+"\n"+allowLine+"\n")
	r := NewRun(dir, nil)
	if got := collect(r, false); len(got) != 2 {
		t.Fatalf("read %d items, want 2", len(got))
	}
	if err := os.Rename(decisions(dir), decisions(dir)+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, decisions(dir), denyLine+"\n")
	got := collect(r, false)
	if len(got) != 2 || got[0].Problem == nil || !strings.Contains(got[0].Problem.Message, "replaced or truncated") {
		t.Fatalf("after a rotation: %+v", got)
	}
	if e := got[1].Event; e == nil || !e.Denied() || e.Line != 1 {
		t.Errorf("the new file's first line: %+v", got[1])
	}
}

// TestOverlongAndLinks: a line past the bound is skipped with a problem
// (the next one still read); a link in place of a record is not followed.
func TestOverlongAndLinks(t *testing.T) {
	dir := newRunDir(t)
	long := `{"decision":"allow","host":"` + strings.Repeat("a", timeline.MaxLineBytes) + `"}`
	appendTo(t, decisions(dir), long[:timeline.MaxLineBytes/2])
	r := NewRun(dir, nil)
	collect(r, false)
	appendTo(t, decisions(dir), long[timeline.MaxLineBytes/2:]+"\n"+allowLine+"\n")
	got := collect(r, false)
	if len(got) != 2 || got[0].Problem == nil || !strings.Contains(got[0].Problem.Message, "longer than") || got[1].Event == nil || got[1].Event.Line != 2 {
		t.Fatalf("overlong line then a good one: %+v", got)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	appendTo(t, secret, allowLine+"\n")
	if err := os.Symlink(secret, filepath.Join(dir, "sidecar", timeline.FileAudit)); err != nil {
		t.Fatal(err)
	}
	got = collect(r, false)
	if len(got) != 1 || got[0].Problem == nil || got[0].Problem.File != timeline.FileAudit {
		t.Fatalf("a link as the audit: %+v", got)
	}
	if again := collect(r, false); len(again) != 0 {
		t.Errorf("the same problem said twice: %+v", again)
	}
}

// TestLinesMax: a record whose lines may be longer than the timeline's
// (the relay's spool) is read with its own bound: a line over the
// timeline's but within Max comes whole; one over Max is a problem.
func TestLinesMax(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool.jsonl")
	big := strings.Repeat("b", timeline.MaxLineBytes+10)
	appendTo(t, path, big+"\n"+strings.Repeat("c", 3*timeline.MaxLineBytes)+"\nsmall\n")
	ls := NewLines(NewFile(path, "spool.jsonl"))
	ls.Max = 2 * timeline.MaxLineBytes
	var got []Line
	for range 5 { // 1 MiB a poll
		ls.Poll(false, func(l Line) { got = append(got, l) })
	}
	if len(got) != 3 || len(got[0].Data) != len(big) || got[1].Problem == "" || got[1].N != 2 || string(got[2].Data) != "small" || got[2].N != 3 {
		t.Fatalf("lines %d; want the long one whole, a problem for line 2, then line 3", len(got))
	}
	if !strings.Contains(got[1].Problem, fmt.Sprintf("longer than %d bytes", ls.Max)) {
		t.Errorf("problem %q, want it to name the bound %d", got[1].Problem, ls.Max)
	}
}

// TestFollowUntilEnd: Follow reads lines a writer appends while it goes,
// each within a few polls of being written, and returns once the harness
// writes timeline.jsonl, after reading everything before it.
func TestFollowUntilEnd(t *testing.T) {
	dir := newRunDir(t)
	r := NewRun(dir, nil)
	var mu sync.Mutex
	var got []Item
	done := make(chan error, 1)
	go func() {
		done <- r.Follow(context.Background(), 10*time.Millisecond, func(it Item) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, it)
		})
	}()
	audit := filepath.Join(dir, "sidecar", timeline.FileAudit)
	appendTo(t, audit, callStart+"\n")
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	appendTo(t, decisions(dir), denyLine+"\n")
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	appendTo(t, decisions(dir), allowLine) // no newline: the run ends
	appendTo(t, filepath.Join(dir, timeline.FileTimeline), "{}\n")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after the run ended")
	}
	if len(got) != 3 || got[0].Event.Kind != timeline.KindCallStart || !got[1].Event.Denied() || got[2].Event.Host != "learn.microsoft.com" {
		t.Fatalf("followed %+v", got)
	}
}

// TestEndReadsCollectedCopies: a record whose live source never showed
// anything (the role's output not visible while the run went) is read
// from the harness's collected copy at the end.
func TestEndReadsCollectedCopies(t *testing.T) {
	dir := t.TempDir()
	appendTo(t, filepath.Join(dir, timeline.FileDecisions), allowLine+"\n"+denyLine+"\n")
	r := NewRun(dir, nil)
	if got := collect(r, false); len(got) != 0 {
		t.Fatalf("read the collected copy before the end: %+v", got)
	}
	if got := collect(r, true); len(got) != 2 || got[1].Event == nil || !got[1].Event.Denied() {
		t.Fatalf("final poll: %+v", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAllowing: each denial the gateway writes gets the spec line that
// allows it (the run's list with the entry added), or why none does.
func TestAllowing(t *testing.T) {
	p := &Policy{AllowedDomains: []string{".microsoft.com", "api.openai.com"}, AllowedIPs: []string{"203.0.113.7"}}
	for _, tc := range []struct{ reason, line, note string }{
		{"host exfil.example is not in allowed_domains", `allowed_domains = [".microsoft.com", "api.openai.com", "exfil.example"]`, "default ports"},
		{`HTTP to port 8080 is not allowed for api.allowed.test: its rule ".allowed.test" opens HTTP 80, 443; CONNECT 443; to open this port add "api.allowed.test:8080" to allowed_domains`,
			`allowed_domains = [".microsoft.com", "api.openai.com", "api.allowed.test:8080"]`, "this port"},
		{"IP literal 198.51.100.1 is not in allowed_ip_addresses", `allowed_ip_addresses = ["203.0.113.7", "198.51.100.1"]`, "address"},
		{"sneaky.allowed.test resolved to a refused address: private address 192.168.208.2 is not in allowed_ip_addresses", `allowed_ip_addresses = ["203.0.113.7", "192.168.208.2"]`, "softening"},
		{"host a\"]\nevil is not in allowed_domains", "", "no spec line"},
		{"protocol upgrade \"websocket\" is refused: ...", "", "whatever the spec says"},
		{"host not in allowlist", "", "does not know this reason"},
		{"scope sidecar/learn/fetch: host x is not in the tool's scope", "", "[[mcp_servers]]"},
		{"host api.openai.com is not in allowed_domains", "", "already in"},
	} {
		f := Allowing(&timeline.Event{Kind: timeline.KindEgress, Decision: "deny", Reason: tc.reason}, p)
		if f.Line != tc.line || !strings.Contains(f.Note, tc.note) {
			t.Errorf("%q:\n got %+v\nwant line %q, a note with %q", tc.reason, f, tc.line, tc.note)
		}
	}
}

// TestPrinterJSON: --json writes one object a line in the tail's schema;
// a denial carries its fix and the call that caused it, known from the
// call's start line and the decision's sidecar scope.
func TestPrinterJSON(t *testing.T) {
	var buf bytes.Buffer
	p := &Printer{W: &buf, JSON: true, RunID: "run-x", Policy: &Policy{AllowedDomains: []string{".microsoft.com"}},
		Origins: func() timeline.Origins { return timeline.Origins{} }}
	for _, l := range []struct{ file, line string }{{timeline.FileAudit, callStart}, {timeline.FileDecisions, denyLine}} {
		e, err := timeline.ParseLine(l.file, []byte(l.line), 1)
		if err != nil {
			t.Fatal(err)
		}
		p.Item(Item{Event: &e, Seen: time.Now()})
	}
	p.Item(Item{Problem: &timeline.Problem{File: timeline.FileDecisions, Line: 3, Message: "invalid line skipped"}})
	var lines []TailLine
	for _, raw := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var l TailLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if l.Schema != TailSchema || l.RunID != "run-x" {
			t.Errorf("line %s: schema or run id wrong", raw)
		}
		lines = append(lines, l)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	deny := lines[1]
	if deny.Type != TypeEvent || deny.Fix == nil || deny.Fix.Line != `allowed_domains = [".microsoft.com", "exfil.example"]` || deny.CausedBy != "tool call microsoft_docs_fetch" {
		t.Errorf("the denial: %+v fix %+v", deny, deny.Fix)
	}
	if lines[2].Type != TypeProblem || lines[2].Problem.Line != 3 {
		t.Errorf("the problem: %+v", lines[2])
	}
}

// TestPrinterFinished: a finished run's record, each denial under the
// call its links name, with the spec line; control characters from the
// record never reach the terminal.
func TestPrinterFinished(t *testing.T) {
	tl, err := timeline.Build(filepath.Join("..", "timeline", "testdata", "runs", "basic"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	p := &Printer{W: &buf, Policy: ReadPolicy(filepath.Join("..", "timeline", "testdata", "runs", "basic"))}
	p.Finished(tl)
	out := buf.String()
	for _, want := range []string{"DENY CONNECT exfil.example:443", "caused by tool call microsoft_docs_fetch", "tool call microsoft_code_sample_search"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\r") {
		t.Error("a control character reached the output")
	}
}
