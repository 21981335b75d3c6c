//go:build linux

package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// run is a run directory whose role files a test grows by hand, with a
// watcher on a clock the test moves.
type run struct {
	t        *testing.T
	dir      string
	now      time.Time
	w        *Watcher
	out, evs bytes.Buffer
	seen     int // bytes of out already returned by poll
}

func newRun(t *testing.T) *run {
	t.Helper()
	r := &run{t: t, dir: t.TempDir(), now: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)}
	for _, s := range Sources {
		if err := os.Mkdir(filepath.Join(r.dir, s.Role), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.w = New(Options{Lines: &r.out, Events: &r.evs, Start: r.now, Now: func() time.Time { return r.now }})
	return r
}

// add appends raw bytes to a role's file.
func (r *run) add(role, file, data string) {
	r.t.Helper()
	f, err := os.OpenFile(filepath.Join(r.dir, role, file), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		r.t.Fatal(err)
	}
}

func (r *run) turns(data string)     { r.add("agent", timeline.FileAgentTurns, data) }
func (r *run) audit(data string)     { r.add("sidecar", timeline.FileAudit, data) }
func (r *run) decisions(data string) { r.add("gateway", timeline.FileDecisions, data) }

// poll moves the clock by d, polls, and returns what it printed.
func (r *run) poll(d time.Duration) string {
	r.now = r.now.Add(d)
	r.w.Poll(r.dir, false)
	got := r.out.String()[r.seen:]
	r.seen = r.out.Len()
	return got
}

// settle polls after d and once more past the lines' grace period.
func (r *run) settle(d time.Duration) string {
	return r.poll(d) + r.poll(defaultLineGrace)
}

func (r *run) events() []timeline.Event {
	r.t.Helper()
	var out []timeline.Event
	for i, l := range strings.Split(strings.TrimSuffix(r.evs.String(), "\n"), "\n") {
		if l == "" {
			continue
		}
		var e timeline.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			r.t.Fatalf("event line %d %q: %v", i+1, l, err)
		}
		if e.Schema != timeline.Schema || e.Seq != len(out)+1 {
			r.t.Fatalf("event line %d: schema %q seq %d, want %q %d", i+1, e.Schema, e.Seq, timeline.Schema, len(out)+1)
		}
		out = append(out, e)
	}
	return out
}

const (
	modelTurn = `{"time":"2026-12-02T04:00:01Z","turn":1,"kind":"model_request","model":"gpt-4.1-mini","tools_requested":["microsoft_docs_search"],"correlation_id":"aaaa0000aaaa0000aaaa0000aaaa0000","duration_ms":812,"ok":true}`
	modelOK   = `{"time":"2026-12-02T04:00:01Z","client":"10.0.0.2:4000","method":"POST","host":"fake-model.e2e.test","port":80,"decision":"allow","rule":"fake-model.e2e.test","correlation_id":"aaaa0000aaaa0000aaaa0000aaaa0000"}`
	toolCall  = `{"time":"2026-12-02T04:00:02Z","kind":"tools/call","name":"microsoft_docs_search","ok":true,"duration_ms":230,"correlation_id":"bbbb0000bbbb0000bbbb0000bbbb0000"}`
	toolDeny  = `{"time":"2026-12-02T04:00:02Z","method":"CONNECT","host":"exfil.example","port":443,"decision":"deny","reason":"host exfil.example is not in allowed_domains","correlation_id":"bbbb0000bbbb0000bbbb0000bbbb0000","scope":"sidecar/learn/microsoft_docs_search"}`
	loneDeny  = `{"time":"2026-12-02T04:00:03Z","method":"GET","host":"probe.invalid","port":80,"decision":"deny","reason":"host probe.invalid is not in allowed_domains"}`
)

func TestLinePerTurnAndToolWithItsEgress(t *testing.T) {
	r := newRun(t)
	// A turn line arrives in two writes: nothing until its newline.
	r.turns(modelTurn[:40])
	if got := r.poll(time.Second); got != "" {
		t.Fatalf("printed %q for half a line", got)
	}
	r.turns(modelTurn[40:] + "\n")
	r.decisions(modelOK + "\n")
	if got := r.poll(50 * time.Millisecond); got != "" {
		t.Fatalf("printed %q before the line's grace period", got)
	}
	got := r.poll(200 * time.Millisecond)
	want := "[model    ] +  1.2s  turn 1 gpt-4.1-mini: asks for microsoft_docs_search  812 ms  egress: 1 allowed\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	// A tool call whose upstream request was denied carries the denial.
	r.audit(toolCall + "\n")
	r.decisions(toolDeny + "\n")
	got = r.settle(time.Second)
	want2 := "[tool     ] +  2.4s  microsoft_docs_search ok  230 ms  egress: 1 DENIED (exfil.example:443)\n"
	if got != want2 {
		t.Fatalf("got  %q\nwant %q", got, want2)
	}
	// A denial of the same call that comes later gets a line of its own.
	r.decisions(toolDeny + "\n")
	got = r.poll(time.Second)
	if want3 := "[egress   ] +  3.4s  DENY CONNECT exfil.example:443: host exfil.example is not in allowed_domains (caused by tool microsoft_docs_search)\n"; got != want3 {
		t.Fatalf("got  %q\nwant %q", got, want3)
	}
	ev := r.events()
	if len(ev) != 5 || ev[0].Kind != timeline.KindModelRequest || ev[1].Kind != timeline.KindEgress || ev[2].Kind != timeline.KindToolCall {
		t.Fatalf("events %+v", ev)
	}
	if ev[0].File != timeline.FileAgentTurns || ev[0].Line != 1 || ev[4].Line != 3 {
		t.Errorf("events do not say where they came from: %+v", ev)
	}
}

func TestDenialWithoutLineIsPrintedAfterGrace(t *testing.T) {
	r := newRun(t)
	r.decisions(loneDeny + "\n")
	if got := r.poll(100 * time.Millisecond); got != "" {
		t.Fatalf("printed %q before the denial's grace period", got)
	}
	got := r.poll(2 * time.Second)
	if !strings.Contains(got, "[egress   ]") || !strings.Contains(got, "DENY GET probe.invalid:80: host probe.invalid is not in allowed_domains") {
		t.Fatalf("got %q", got)
	}
}

func TestDenialBeforeItsLineIsCarriedByTheLine(t *testing.T) {
	r := newRun(t)
	r.decisions(toolDeny + "\n")
	r.poll(100 * time.Millisecond)
	r.audit(toolCall + "\n")
	got := r.settle(500 * time.Millisecond)
	got += r.poll(2 * time.Second)
	if strings.Count(got, "\n") != 1 || !strings.Contains(got, "egress: 1 DENIED (exfil.example:443)") {
		t.Fatalf("want one line carrying the denial, got %q", got)
	}
}

// TestAgentsOwnEgressIsNotTheCalls: a request of the workload's own that
// carries a tool call's correlation id (it chose the traceparent the
// sidecar adopted) is not counted as the call's egress but printed as the
// agent's, with a warning; the sidecar is known by its scope or by the
// address the harness recorded for it (redteam2 finding 3).
func TestAgentsOwnEgressIsNotTheCalls(t *testing.T) {
	const (
		agentGet  = `{"time":"2026-12-02T04:00:02Z","client":"10.0.0.5:5000","method":"GET","host":"own.example","port":80,"decision":"allow","correlation_id":"bbbb0000bbbb0000bbbb0000bbbb0000","scope":"agent"}`
		agentDeny = `{"time":"2026-12-02T04:00:02Z","client":"10.0.0.5:5001","method":"CONNECT","host":"denied.invalid","port":443,"decision":"deny","reason":"not allowed","correlation_id":"bbbb0000bbbb0000bbbb0000bbbb0000"}`
		sideOK    = `{"time":"2026-12-02T04:00:02Z","client":"10.0.0.3:5002","method":"CONNECT","host":"learn.microsoft.com","port":443,"decision":"allow","correlation_id":"bbbb0000bbbb0000bbbb0000bbbb0000"}`
	)
	r := newRun(t)
	started := `[{"role":"sidecar","ip_addresses":{"internal":"10.0.0.3"},"ok":true}]`
	if err := os.WriteFile(filepath.Join(r.dir, "mcp-sidecar-start-results.json"), []byte(started), 0o644); err != nil {
		t.Fatal(err)
	}
	r.audit(toolCall + "\n")
	r.decisions(sideOK + "\n" + agentGet + "\n" + agentDeny + "\n")
	got := r.settle(time.Second) + r.poll(2*time.Second)
	for _, want := range []string{
		"[egress   ] +  1.0s  allow GET own.example:80: the agent's own request, carrying the correlation id of tool microsoft_docs_search (not counted as the call's)\n",
		"[egress   ] +  1.0s  DENY CONNECT denied.invalid:443: not allowed: the agent's own request, carrying the correlation id of tool microsoft_docs_search (not counted as the call's)\n",
		"[tool     ] +  1.1s  microsoft_docs_search ok  230 ms  egress: 1 allowed\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "DENIED") {
		t.Errorf("the agent's denial was counted as the call's:\n%s", got)
	}
}

func TestHostileLines(t *testing.T) {
	r := newRun(t)
	long := `{"kind":"tools/call","name":"` + strings.Repeat("x", timeline.MaxLineBytes) + `"}`
	r.audit("not json\n")
	r.audit(`{"kind":"tools/call","name":"a\u001b[2Jb\nc","ok":false,"error":"boom\r\u202e"}` + "\n")
	r.audit(long[:len(long)/2]) // an overlong line, in two writes
	r.poll(10 * time.Millisecond)
	r.audit(long[len(long)/2:] + "\n")
	r.audit(`{"kind":"tools/call","name":"after_the_long_one","ok":true}` + "\n")
	r.audit("[1,2]\n{\"kind\":\"nope\"}\n{}\n\x00\x01\n")
	r.settle(time.Second)
	got := r.out.String()
	for _, want := range []string{
		"mcp-sidecar-tool-calls.jsonl:1: invalid line skipped",
		`a\x1b[2Jb\nc FAILED: boom\x0d\u202e`,
		"mcp-sidecar-tool-calls.jsonl:3: line longer than 1048576 bytes skipped",
		"after_the_long_one ok",
		"more problems, not shown",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for i, c := range got {
		if (c < 0x20 && c != '\n') || c == 0x7f || c == 0x202e {
			t.Fatalf("control character %U at %d in:\n%s", c, i, got)
		}
	}
	if n := strings.Count(got, "[problem  ]"); n != maxProblemLines+1 {
		t.Errorf("%d problem lines, want %d then one saying more are not shown:\n%s", n, maxProblemLines, got)
	}
	problems := 0
	for _, e := range r.events() {
		if e.Kind == timeline.KindSourceProblem {
			problems++
		}
	}
	if problems != 6 {
		t.Errorf("%d problem events, want 6 (every one, even those not printed)", problems)
	}
}

func TestLongFieldIsCut(t *testing.T) {
	r := newRun(t)
	r.audit(`{"kind":"tools/call","name":"` + strings.Repeat("n", 5000) + `","ok":true}` + "\n")
	got := r.settle(time.Second)
	if len(got) > 400 || !strings.Contains(got, "…") {
		t.Errorf("a 5000-character tool name printed as %d bytes: %q", len(got), got)
	}
}

func TestTornLastLine(t *testing.T) {
	r := newRun(t)
	r.turns(`{"turn":2,"kind":"answer_saved","ok":true}`) // valid, no newline
	r.audit(`{"kind":"tools/call","na`)                   // the writer died mid-line
	if got := r.poll(time.Second); got != "" {
		t.Fatalf("printed %q before the final poll", got)
	}
	r.now = r.now.Add(time.Second)
	r.w.Poll(r.dir, true) // the final poll prints what it holds at once
	got := r.out.String()
	if !strings.Contains(got, "answer saved") || !strings.Contains(got, "mcp-sidecar-tool-calls.jsonl:1: torn last line (no newline, 24 bytes) skipped") {
		t.Errorf("got %q", got)
	}
}

func TestPlantedLinkAndFIFOAreNotFollowed(t *testing.T) {
	r := newRun(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(modelTurn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(r.dir, "agent", timeline.FileAgentTurns)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(r.dir, "sidecar", timeline.FileAudit), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() { done <- r.poll(time.Second) + r.poll(time.Second) }()
	select {
	case got := <-done:
		if strings.Contains(got, "turn 1") {
			t.Errorf("followed the link: %q", got)
		}
		if strings.Count(got, "agent-turns.jsonl: cannot be followed") != 1 || strings.Count(got, "mcp-sidecar-tool-calls.jsonl: not a regular file") != 1 {
			t.Errorf("want each refusal said once, got %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher hung on a FIFO")
	}
}

func TestTruncatedFileIsFollowedFromItsStart(t *testing.T) {
	r := newRun(t)
	r.audit(toolCall + "\n" + toolCall + "\n")
	r.settle(time.Second)
	path := filepath.Join(r.dir, "sidecar", timeline.FileAudit)
	if err := os.WriteFile(path, []byte(`{"kind":"tools/call","name":"again","ok":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := r.settle(time.Second)
	if !strings.Contains(got, "replaced or truncated") || !strings.Contains(got, "again ok") {
		t.Errorf("got %q", got)
	}
}

func TestQuietStillStreamsEvents(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sidecar"), 0o755)
	os.WriteFile(filepath.Join(dir, "sidecar", timeline.FileAudit), []byte(toolCall+"\n"), 0o644)
	var evs bytes.Buffer
	w := New(Options{Events: &evs})
	w.Phase(timeline.PhaseInfo{Name: "image", Start: time.Now(), DurationMS: 12, OK: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.Watch(ctx, dir) // a cancelled watch still reads what is there
	lines := strings.Split(strings.TrimSpace(evs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"kind":"phase"`) || !strings.Contains(lines[1], `"kind":"tool_call"`) {
		t.Errorf("events:\n%s", evs.String())
	}
}

func TestWriteErrorStopsWriting(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sidecar"), 0o755)
	os.WriteFile(filepath.Join(dir, "sidecar", timeline.FileAudit), []byte(toolCall+"\n"+toolCall+"\n"), 0o644)
	w := New(Options{Lines: failing{}, Events: failing{}})
	w.Poll(dir, true)
	if w.Err() == nil {
		t.Error("no error after failing writes")
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, os.ErrClosed }

// TestLinesInTheOrderTheyHappened: records read in one poll come file by
// file; the lines come in time order (turn, its tool, next turn).
func TestLinesInTheOrderTheyHappened(t *testing.T) {
	r := newRun(t)
	r.turns(`{"time":"2026-12-02T04:00:01Z","turn":1,"kind":"model_request","tools_requested":["a"],"ok":true}` + "\n" +
		`{"time":"2026-12-02T04:00:03Z","turn":2,"kind":"model_request","ok":true}` + "\n" +
		`{"time":"2026-12-02T04:00:04Z","turn":2,"kind":"answer_saved","ok":true}` + "\n")
	r.audit(`{"time":"2026-12-02T04:00:02Z","kind":"tools/call","name":"a","ok":true,"duration_ms":0.4}` + "\n")
	got := r.settle(time.Second)
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		kinds = append(kinds, strings.TrimSpace(l[1:10]))
	}
	if strings.Join(kinds, ",") != "model,tool,model,answer" || !strings.Contains(got, "a ok  <1 ms") {
		t.Errorf("got:\n%s", got)
	}
}

// TestLinesAreBounded: a workload writing records without end does not
// flood the terminal; the events keep every record.
func TestLinesAreBounded(t *testing.T) {
	r := newRun(t)
	var b strings.Builder
	for i := 0; i < maxLines+500; i++ {
		fmt.Fprintf(&b, `{"kind":"tools/call","name":"t%d","ok":true}`+"\n", i)
	}
	r.audit(b.String())
	got := r.settle(time.Second)
	if n := strings.Count(got, "\n"); n != maxLines+1 || !strings.Contains(got, "no more are printed") {
		t.Errorf("%d lines printed, want %d and one saying no more are", n, maxLines+1)
	}
	if n := len(r.events()); n != maxLines+500 {
		t.Errorf("%d events, want %d", n, maxLines+500)
	}
}

// TestCallStartLines: a call_start prints nothing (its end line does),
// is streamed as an event, and a call with no end line by the final poll
// is printed then.
func TestCallStartLines(t *testing.T) {
	r := newRun(t)
	start := `{"time":"2026-12-02T04:00:02Z","kind":"call_start","name":"microsoft_docs_search","ok":true,"correlation_id":"bbbb0000bbbb0000bbbb0000bbbb0000"}`
	slow := `{"time":"2026-12-02T04:00:03Z","kind":"call_start","name":"fx_echo","ok":true,"correlation_id":"cccc0000cccc0000cccc0000cccc0000"}`
	r.audit(start + "\n" + toolCall + "\n" + slow + "\n")
	got := r.settle(time.Second)
	want := "[tool     ] +  1.1s  microsoft_docs_search ok  230 ms\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	r.now = r.now.Add(time.Second)
	r.w.Poll(r.dir, true)
	got = r.out.String()[r.seen:]
	if !strings.Contains(got, "fx_echo started, no end line yet") || strings.Contains(got, "microsoft_docs_search") {
		t.Errorf("final poll printed %q, want the unended fx_echo call only", got)
	}
	ev := r.events()
	if len(ev) != 3 || ev[0].Kind != timeline.KindCallStart || ev[1].Kind != timeline.KindToolCall || ev[2].Kind != timeline.KindCallStart {
		t.Errorf("events %+v, want call_start, tool_call, call_start", ev)
	}
}
