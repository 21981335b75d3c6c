// Package progress shows what the agent is doing while it does it. A
// watcher on the host tails the records the roles write into their output
// directories during a run (the agent's agent-turns.jsonl, the sidecar's
// audit, the gateway's egress-decisions.jsonl), prints one progress line
// per model turn and per tool call (its duration, and the egress it
// caused, allowed or denied), and streams every record as a timeline event
// (JSON lines, the schema of timeline.jsonl) while the run goes.
//
// It reads the files through internal/follow's reader of growing records
// (the one `runs tail` and the live OpenTelemetry export use).
//
// Every byte it reads was written inside the sandbox, by a workload that
// may be hostile: files are opened without following links and only when
// they are regular files, at most a bounded amount is read per file, a line
// longer than the timeline's bound is skipped, a torn or invalid line is
// reported (a bounded number of times) and skipped, and every string that
// reaches the terminal is cleaned of control characters and cut short.
package progress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/follow"
	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// Sources are the files the watcher tails: each role's own output
// directory (<run dir>/<role>/) holds its file while the run goes. The
// gateway's comes last, so that a poll has read the calls before the
// decisions they caused.
var Sources = []Source{
	{Role: "agent", File: timeline.FileAgentTurns},
	{Role: "sidecar", File: timeline.FileAudit},
	{Role: "gateway", File: timeline.FileDecisions},
}

// Source is one tailed file.
type Source struct{ Role, File string }

// Bounds on what a hostile workload can make the host do.
const (
	maxField         = 160  // characters of one field on a progress line
	maxProblemLines  = 5    // problem lines printed per file
	maxLines         = 2000 // progress lines printed in all
	defaultInterval  = 100 * time.Millisecond
	defaultLineGrace = 150 * time.Millisecond
	defaultDenyGrace = time.Second
)

// Options configure a [Watcher].
type Options struct {
	// Lines receives the progress lines; nil prints none (--quiet).
	Lines io.Writer
	// Events receives every event as one JSON line; nil streams none.
	Events io.Writer
	// Start is when the command started: lines say how long after it
	// they were printed.
	Start time.Time
	// Interval is how often the files are polled (default 100 ms).
	Interval time.Duration
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// Watcher follows one run. Its methods may be called from several
// goroutines: Phase from the lifecycle's, Watch from its own.
type Watcher struct {
	o  Options
	mu sync.Mutex
	// seq numbers the streamed events in the order they were seen.
	seq   int
	files map[string]*tail
	// origins tells the sidecar's requests from the workload's; it is
	// read from the harness's files until the sidecar's address is known.
	origins timeline.Origins
	// egress tallies the gateway's decisions per key (see lineKey).
	egress map[string]*tally
	// held are lines waiting one grace period for the decisions that
	// belong to them; printed maps keys to what was printed.
	held    []heldLine
	printed map[string]string
	// orphans are denials no line has claimed yet.
	orphans []heldDeny
	// started are the sidecar's call_start events whose end line has not
	// been seen, by correlation id; the final flush prints those left.
	started map[string]timeline.Event
	lines   int   // progress lines printed
	errW    error // the first write error; the watcher stops writing
}

type tally struct {
	allowed, denied int
	firstDenied     string
}

type heldLine struct {
	at   time.Time
	e    timeline.Event
	text string
}

type heldDeny struct {
	at  time.Time
	e   timeline.Event
	key string
}

// New returns a watcher.
func New(o Options) *Watcher {
	if o.Interval <= 0 {
		o.Interval = defaultInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Start.IsZero() {
		o.Start = o.Now()
	}
	return &Watcher{o: o, files: map[string]*tail{}, egress: map[string]*tally{}, printed: map[string]string{}, started: map[string]timeline.Event{}}
}

// Watch tails runDir's sources until ctx ends, then reads what is left,
// prints what it holds and returns. It never fails: a source it cannot read
// is reported as a problem event and skipped.
func (w *Watcher) Watch(ctx context.Context, runDir string) {
	tick := time.NewTicker(w.o.Interval)
	defer tick.Stop()
	for {
		w.Poll(runDir, false)
		select {
		case <-ctx.Done():
			w.Poll(runDir, true)
			return
		case <-tick.C:
		}
	}
}

// Poll reads what the sources gained since the last poll and prints the
// lines whose grace period is over. final reads a torn last line too and
// prints everything held.
func (w *Watcher) Poll(runDir string, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.origins.SidecarKnown() {
		w.origins = timeline.ReadOrigins(runDir)
	}
	for _, s := range Sources {
		t := w.files[s.File]
		if t == nil {
			t = &tail{src: s}
			w.files[s.File] = t
		}
		t.read(filepath.Join(runDir, s.Role, s.File), final, w.line, w.problem)
	}
	w.flush(final)
}

// Phase streams a harness phase as an event (the lifecycle's OnPhase).
func (w *Watcher) Phase(p timeline.PhaseInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emit(timeline.PhaseEvent(p))
}

// Err is the first error writing lines or events.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errW
}

// line handles one complete line of a source.
func (w *Watcher) line(src Source, raw []byte, n int) {
	e, err := timeline.ParseLine(src.File, raw, n)
	if err != nil {
		w.problem(src, n, fmt.Sprintf("invalid line skipped: %v", err))
		return
	}
	w.emit(e)
	now := w.o.Now()
	switch e.Kind {
	case timeline.KindEgress:
		w.decision(e, now)
	case timeline.KindModelRequest:
		w.hold(e, now, "model", modelText(e))
	case timeline.KindCallStart:
		// No line yet: the call's end line says how it went. One that
		// never comes is printed by the final flush.
		w.started[e.CorrelationID] = e
	case timeline.KindToolCall, timeline.KindResourceRead:
		delete(w.started, e.CorrelationID)
		w.hold(e, now, "tool", toolText(e))
	case timeline.KindInvalidRequest:
		w.hold(e, now, "mcp", clean(e.Summary))
	case timeline.KindAgentToolCall:
		// A call the sidecar served has its own line (from the audit,
		// which the workload does not write); the agent's record is shown
		// only for a call that never got there (refused, failed).
		if !e.OK {
			w.hold(e, now, "tool", fmt.Sprintf("%s refused by the agent: %s", clean(orDash(e.Name)), clean(orDash(e.Error))))
		}
	case timeline.KindAnswerSaved:
		w.hold(e, now, "answer", "answer saved")
	case timeline.KindAgentError:
		w.hold(e, now, "error", "the agent stopped: "+clean(orDash(e.Error)))
	}
}

func (w *Watcher) problem(src Source, n int, msg string) {
	t := w.files[src.File]
	w.emit(timeline.ProblemEvent(src.File, n, msg))
	if t.problems++; t.problems > maxProblemLines {
		if t.problems == maxProblemLines+1 {
			w.print("problem", fmt.Sprintf("%s: more problems, not shown (the events and timeline.jsonl have them)", src.File))
		}
		return
	}
	where := src.File
	if n > 0 {
		where = fmt.Sprintf("%s:%d", src.File, n)
	}
	w.print("problem", where+": "+clean(msg))
}

// lineKey is what a line's egress is tallied under: its correlation id,
// apart for the sidecar's records, so that a request of the workload's own
// that carries a tool call's id (the workload chose the traceparent the
// sidecar adopted) is never counted as the call's. "" without an id.
func lineKey(e timeline.Event) string {
	switch {
	case e.CorrelationID == "":
		return ""
	case e.Source == timeline.SourceSidecar:
		return "s:" + e.CorrelationID
	}
	return "a:" + e.CorrelationID
}

// decision counts a gateway decision under its key (the sidecar's only
// when the decision provably came from the sidecar), prints a denial no
// line will carry, and warns about a request of the agent's own that
// carries a tool call's correlation id.
func (w *Watcher) decision(e timeline.Event, now time.Time) {
	origin := w.origins.Of(&e)
	key := ""
	if id := e.CorrelationID; id != "" {
		key = "a:" + id
		if origin == timeline.OriginSidecar {
			key = "s:" + id
		}
		if origin == timeline.OriginAgent {
			if by, ok := w.lineFor("s:" + id); ok {
				text := fmt.Sprintf("allow %s %s", clean(e.Method), clean(hostPort(e)))
				if e.Denied() {
					text = denyText(e)
				}
				w.print("egress", text+": the agent's own request, carrying the correlation id of "+by+" (not counted as the call's)")
				return
			}
		}
		t := w.egress[key]
		if t == nil {
			t = &tally{}
			w.egress[key] = t
		}
		if e.Denied() {
			t.denied++
			if t.firstDenied == "" {
				t.firstDenied = hostPort(e)
			}
		} else {
			t.allowed++
		}
	}
	if !e.Denied() {
		return
	}
	if by, ok := w.printed[key]; ok && key != "" {
		w.print("egress", denyText(e)+" (caused by "+by+")")
		return
	}
	if key != "" && w.isHeld(key) {
		return // the held line will carry it
	}
	w.orphans = append(w.orphans, heldDeny{at: now, e: e, key: key})
}

// lineFor describes the printed or held line with key.
func (w *Watcher) lineFor(key string) (string, bool) {
	if by, ok := w.printed[key]; ok {
		return by, true
	}
	for _, h := range w.held {
		if lineKey(h.e) == key {
			return describe(h.e), true
		}
	}
	return "", false
}

func (w *Watcher) isHeld(key string) bool {
	for _, h := range w.held {
		if lineKey(h.e) == key {
			return true
		}
	}
	return false
}

func (w *Watcher) hold(e timeline.Event, now time.Time, kind, text string) {
	w.held = append(w.held, heldLine{at: now, e: e, text: kind + "\x00" + text})
}

// flush prints the held lines whose grace is over (all when final), each
// with the egress its correlation id caused, and the denials no line
// claimed in time.
func (w *Watcher) flush(final bool) {
	now := w.o.Now()
	var due, keep []heldLine
	for _, h := range w.held {
		if !final && now.Sub(h.at) < defaultLineGrace {
			keep = append(keep, h)
		} else {
			due = append(due, h)
		}
	}
	// In the order they happened (the records of one poll come file by
	// file): a turn, the tool it asked for, the next turn.
	sort.SliceStable(due, func(i, j int) bool { return due[i].e.Time.Before(due[j].e.Time) })
	for _, h := range due {
		kind, text, _ := strings.Cut(h.text, "\x00")
		if d := durText(h.e.DurationMS); d != "" {
			text += "  " + d
		}
		if key := lineKey(h.e); key != "" {
			if t := w.egress[key]; t != nil {
				text += "  " + egressText(t)
			}
			w.printed[key] = describe(h.e)
		}
		w.print(kind, text)
	}
	w.held = keep
	if final {
		w.unended()
	}
	rest := w.orphans[:0]
	for _, o := range w.orphans {
		key := o.key
		switch {
		case key != "" && w.isHeld(key):
			// claimed by a line still held: it carries the denial
		case key != "" && w.printed[key] != "":
			// claimed by a line printed since: it carried the denial
		case final || now.Sub(o.at) >= defaultDenyGrace:
			w.print("egress", denyText(o.e))
		default:
			rest = append(rest, o)
		}
	}
	w.orphans = rest
}

// unended prints the calls the sidecar's audit shows started with no end
// line by the final poll: in flight when the workload ended (the final
// poll comes before the sidecar is stopped; the audit and the timeline
// say how each ended).
func (w *Watcher) unended() {
	starts := slices.SortedFunc(maps.Values(w.started), func(a, b timeline.Event) int { return a.Time.Compare(b.Time) })
	for _, e := range starts {
		w.print("tool", clean(orDash(e.Name))+" started, no end line yet: in flight when the run ended")
	}
	clear(w.started)
}

// emit streams one event.
func (w *Watcher) emit(e timeline.Event) {
	if w.o.Events == nil || w.errW != nil {
		return
	}
	w.seq++
	e.Seq = w.seq
	e.Schema = timeline.Schema
	b, err := json.Marshal(&e)
	if err != nil {
		return // an event always encodes; the line's fields are plain
	}
	if _, err := w.o.Events.Write(append(b, '\n')); err != nil {
		w.errW = fmt.Errorf("writing events: %w", err)
	}
}

// print writes one progress line: what it is, how long after the start.
func (w *Watcher) print(kind, text string) {
	if w.o.Lines == nil || w.errW != nil {
		return
	}
	// A workload can write records faster than anyone reads: past the
	// bound, one line says so and the events and the record keep the rest.
	if w.lines++; w.lines > maxLines {
		if w.lines == maxLines+1 {
			kind, text = "progress", fmt.Sprintf("more than %d lines: no more are printed (--events and timeline.jsonl have every event)", maxLines)
		} else {
			return
		}
	}
	since := w.o.Now().Sub(w.o.Start).Seconds()
	if _, err := fmt.Fprintf(w.o.Lines, "[%-9s] +%5.1fs  %s\n", kind, since, text); err != nil {
		w.errW = fmt.Errorf("writing progress: %w", err)
	}
}

func modelText(e timeline.Event) string {
	s := fmt.Sprintf("turn %d", e.Turn)
	if e.Model != "" {
		s += " " + clean(e.Model)
	}
	switch {
	case !e.OK:
		return s + ": request FAILED: " + clean(orDash(e.Error))
	case len(e.ToolsRequested) > 0:
		tools := make([]string, len(e.ToolsRequested))
		for i, t := range e.ToolsRequested {
			tools[i] = clean(t)
		}
		return s + ": asks for " + cut(strings.Join(tools, ", "))
	}
	return s + ": answered"
}

func toolText(e timeline.Event) string {
	s := clean(orDash(e.Name))
	if e.Kind == timeline.KindResourceRead {
		s = "read " + s
	}
	if !e.OK {
		return s + " FAILED: " + clean(orDash(e.Error))
	}
	return s + " ok"
}

func denyText(e timeline.Event) string {
	return fmt.Sprintf("DENY %s %s: %s", clean(e.Method), clean(hostPort(e)), clean(orDash(e.Reason)))
}

func egressText(t *tally) string {
	var parts []string
	if t.allowed > 0 {
		parts = append(parts, fmt.Sprintf("%d allowed", t.allowed))
	}
	if t.denied > 0 {
		parts = append(parts, fmt.Sprintf("%d DENIED (%s)", t.denied, clean(t.firstDenied)))
	}
	return "egress: " + strings.Join(parts, ", ")
}

// describe names a printed line for a denial that comes after it.
func describe(e timeline.Event) string {
	switch e.Kind {
	case timeline.KindModelRequest:
		return fmt.Sprintf("turn %d's model request", e.Turn)
	case timeline.KindToolCall, timeline.KindAgentToolCall:
		return "tool " + clean(orDash(e.Name))
	case timeline.KindResourceRead:
		return "read " + clean(orDash(e.Name))
	}
	return clean(e.Kind)
}

func durText(ms float64) string {
	switch {
	case ms <= 0:
		return ""
	case ms < 1:
		return "<1 ms"
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}

func hostPort(e timeline.Event) string {
	if e.Port != "" {
		return e.Host + ":" + e.Port
	}
	return e.Host
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clean makes a recorded string safe for one terminal line: control
// characters escaped (a newline too: it would start a forged line), and
// cut to maxField characters.
func clean(s string) string {
	s = termtext.Clean(s)
	s = strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
	return cut(s)
}

func cut(s string) string {
	if r := []rune(s); len(r) > maxField {
		return string(r[:maxField]) + "…"
	}
	return s
}

// tail follows one file through internal/follow's reader (the one
// `runs tail` and the live export use), saying each kind of problem with
// the whole file once.
type tail struct {
	src      Source
	lines    *follow.Lines
	problems int
	gone     bool // the file was replaced or truncated: reported once
	full     bool // follow.MaxRecordBytes reached: reported once
	bad      bool // the file could not be opened or is not regular: reported once
}

// read consumes what the file gained: complete lines go to line, a line
// longer than the bound is skipped, and (final) a torn last line is
// parsed or reported.
func (t *tail) read(path string, final bool, line func(Source, []byte, int), problem func(Source, int, string)) {
	if t.lines == nil {
		t.lines = follow.NewLines(follow.NewFile(path, t.src.File))
	}
	t.lines.Poll(final, func(l follow.Line) {
		switch {
		case l.Err != nil:
			if msg := t.recordProblem(l); msg != "" {
				problem(t.src, 0, msg)
			}
		case l.Problem != "":
			if !strings.HasPrefix(l.Problem, "torn last line longer") { // never said
				problem(t.src, l.N, l.Problem)
			}
		case l.Final:
			if _, err := timeline.ParseLine(t.src.File, l.Data, l.N); err == nil {
				line(t.src, l.Data, l.N)
			} else {
				problem(t.src, l.N, fmt.Sprintf("torn last line (no newline, %d bytes) skipped", len(l.Data)))
			}
		default:
			line(t.src, l.Data, l.N)
		}
	})
}

// recordProblem is what to say of a problem with the whole file, the
// first time of its kind ("" after).
func (t *tail) recordProblem(l follow.Line) string {
	once := func(said *bool, msg string) string {
		if *said {
			return ""
		}
		*said = true
		return msg
	}
	switch {
	case errors.Is(l.Err, follow.ErrRestarted):
		return once(&t.gone, "the file was replaced or truncated during the run; following it from its start")
	case errors.Is(l.Err, follow.ErrTooLarge):
		return once(&t.full, l.Problem)
	case errors.Is(l.Err, follow.ErrNotRegular):
		return once(&t.bad, "not a regular file: not followed")
	}
	return once(&t.bad, "cannot be followed: "+strings.TrimPrefix(l.Problem, "opening: "))
}
