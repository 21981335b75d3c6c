package follow

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// TailSchema is the value of every `runs tail --json` line's "schema".
const TailSchema = "mcpsidecar.tail/v1"

// Types of tail lines.
const (
	TypeEvent   = "event"   // one event of the record (timeline.jsonl's schema)
	TypeProblem = "problem" // a torn, invalid or overlong line, a record that cannot be read
	TypeEnd     = "end"     // the run ended: its exit code and verdict
)

// TailLine is one line of `runs tail --json` (docs/reading-a-run.md).
type TailLine struct {
	Schema string `json:"schema"`
	Type   string `json:"type"`
	RunID  string `json:"run_id"`
	// Seen is when the tail read the line (a running run only): Seen
	// minus the event's time is the tail's delay.
	Seen  time.Time       `json:"seen,omitzero"`
	Event *timeline.Event `json:"event,omitempty"`
	// CausedBy names the call or model request a decision belongs to.
	CausedBy string `json:"caused_by,omitempty"`
	// Fix says, for a denied decision, what spec line would allow it.
	Fix     *Fix              `json:"fix,omitempty"`
	Problem *timeline.Problem `json:"problem,omitempty"`
	End     *End              `json:"end,omitempty"`
}

// End is how the run ended, from its final run-metadata.json.
type End struct {
	ExitCode     int      `json:"exit_code"`
	VerdictOK    bool     `json:"verdict_ok"`
	FailedChecks []string `json:"failed_checks,omitempty"`
}

// Printer writes what a tail reads, one line per event, problem or end:
// text, or with JSON one [TailLine] per line. Every string read from the
// record is cleaned of control characters before it reaches a terminal.
type Printer struct {
	W      io.Writer
	JSON   bool
	RunID  string
	Policy *Policy
	// Origins tells the sidecar's requests from the workload's (nil: a
	// decision is named as a call's only by a finished run's links).
	Origins func() timeline.Origins
	// causes are the calls and model requests seen, by correlation id.
	causes map[string]string
	err    error
}

// Err is the first error writing.
func (p *Printer) Err() error { return p.err }

// Item prints one item of a running run.
func (p *Printer) Item(it Item) {
	if it.Problem != nil {
		p.write(TailLine{Type: TypeProblem, Problem: it.Problem, Seen: it.Seen})
		return
	}
	e := it.Event
	p.remember(e)
	p.Event(e, p.liveCause(e), it.Seen)
}

// Event prints one event; causedBy names what it belongs to.
func (p *Printer) Event(e *timeline.Event, causedBy string, seen time.Time) {
	l := TailLine{Type: TypeEvent, Event: e, CausedBy: causedBy, Seen: seen}
	if e.Denied() {
		fix := Allowing(e, p.Policy)
		l.Fix = &fix
	}
	p.write(l)
}

// Finished prints a finished run's whole record: every event, each
// decision with what its links say caused it.
func (p *Printer) Finished(tl *timeline.Timeline) {
	bySeq := map[int]*timeline.Event{}
	for i := range tl.Events {
		bySeq[tl.Events[i].Seq] = &tl.Events[i]
	}
	for i := range tl.Events {
		e := &tl.Events[i]
		cause := ""
		if par := bySeq[e.Parent]; e.Parent != 0 && par != nil {
			cause = describe(par)
		}
		p.Event(e, cause, time.Time{})
	}
	for i := range tl.Problems {
		p.write(TailLine{Type: TypeProblem, Problem: &tl.Problems[i]})
	}
}

// EndOf prints how the run ended (m nil: its run-metadata.json could not
// be read).
func (p *Printer) EndOf(m *runs.Metadata) {
	end := &End{ExitCode: -1}
	if m != nil {
		end = &End{ExitCode: m.ExitCode, VerdictOK: m.Verdict.OK}
		for _, c := range m.Verdict.Checks {
			if !c.OK {
				end.FailedChecks = append(end.FailedChecks, c.Name)
			}
		}
	}
	p.write(TailLine{Type: TypeEnd, End: end})
}

// remember keeps what a later decision with the same correlation id
// belongs to.
func (p *Printer) remember(e *timeline.Event) {
	if e.CorrelationID == "" {
		return
	}
	switch e.Kind {
	case timeline.KindCallStart, timeline.KindToolCall, timeline.KindResourceRead, timeline.KindModelRequest:
		if p.causes == nil {
			p.causes = map[string]string{}
		}
		key := "s:" + e.CorrelationID
		if e.Kind == timeline.KindModelRequest {
			key = "a:" + e.CorrelationID
		}
		p.causes[key] = describe(e)
	}
}

// liveCause names the call a decision of a running run belongs to: the
// sidecar's call only when the decision provably came from the sidecar
// (the workload chooses the ids it sends, and may reuse a call's).
func (p *Printer) liveCause(e *timeline.Event) string {
	if e.Kind != timeline.KindEgress || e.CorrelationID == "" || p.Origins == nil {
		return ""
	}
	if p.Origins().Of(e) == timeline.OriginSidecar {
		return p.causes["s:"+e.CorrelationID]
	}
	return p.causes["a:"+e.CorrelationID]
}

func describe(e *timeline.Event) string {
	switch e.Kind {
	case timeline.KindModelRequest:
		return fmt.Sprintf("turn %d's model request", e.Turn)
	case timeline.KindToolCall, timeline.KindCallStart, timeline.KindAgentToolCall:
		return "tool call " + orDash(e.Name)
	case timeline.KindResourceRead:
		return "resource read " + orDash(e.Name)
	}
	return e.Kind
}

func (p *Printer) write(l TailLine) {
	if p.err != nil {
		return
	}
	l.Schema, l.RunID = TailSchema, p.RunID
	var b []byte
	if p.JSON {
		var err error
		if b, err = json.Marshal(&l); err != nil {
			p.err = fmt.Errorf("encoding a tail line: %w", err)
			return
		}
		b = append(b, '\n')
	} else {
		b = []byte(text(l))
	}
	if _, err := p.W.Write(b); err != nil {
		p.err = fmt.Errorf("writing the tail: %w", err)
	}
}

// text is a tail line for a terminal: the event's time, its source and
// summary; a denial gets what caused it and the spec line that allows it
// on lines of their own.
func text(l TailLine) string {
	switch l.Type {
	case TypeProblem:
		return fmt.Sprintf("problem  %s\n", termtext.Line(l.Problem.String()))
	case TypeEnd:
		s := fmt.Sprintf("run ended: exit code %d, verdict ", l.End.ExitCode)
		if l.End.VerdictOK {
			return s + "ok\n"
		}
		if len(l.End.FailedChecks) > 0 {
			return s + "failed (" + termtext.Line(strings.Join(l.End.FailedChecks, ", ")) + ")\n"
		}
		return s + "failed\n"
	}
	e := l.Event
	at := "--:--:--.---"
	if !e.Time.IsZero() {
		at = e.Time.UTC().Format("15:04:05.000")
	}
	s := fmt.Sprintf("%s  %-7s  %s", at, e.Source, termtext.Line(e.Summary))
	if d := durText(e.DurationMS); d != "" && e.Kind != timeline.KindEgress {
		s += "  (" + d + ")"
	}
	if l.CausedBy != "" && !e.Denied() {
		s += "  [" + termtext.Line(l.CausedBy) + "]"
	}
	s += "\n"
	if !e.Denied() {
		return s
	}
	if l.CausedBy != "" {
		s += "                         caused by " + termtext.Line(l.CausedBy) + "\n"
	}
	if l.Fix.Line != "" {
		s += "                         to allow it, in the spec: " + l.Fix.Line + "\n"
		s += "                         (" + l.Fix.Note + ")\n"
	} else {
		s += "                         " + l.Fix.Note + "\n"
	}
	return s
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
