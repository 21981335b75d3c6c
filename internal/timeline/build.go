package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// KindContainerStart marks a container's start, when the harness records it.
const KindContainerStart = "container_start"

// maxAnswerBytes bounds the answer shown in the report.
const maxAnswerBytes = 8 << 10

// Build reads the run directory and returns its joined timeline. Only an
// unreadable directory is an error: missing, torn or invalid sources become
// [Timeline.Problems].
func Build(runDir string) (*Timeline, error) {
	r := &sourceReader{dir: runDir}
	fi, err := os.Stat(runDir)
	if err != nil {
		return nil, fmt.Errorf("reading run directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("reading run directory %s: not a directory", runDir)
	}
	t := &Timeline{Schema: Schema, Dir: runDir, RunID: filepath.Base(runDir)}
	b := &builder{t: t, r: r}
	b.readMetadata()
	b.readLineSources()
	b.foldCallStarts() // callstart.go
	b.readExtras()
	b.readGlance()
	b.boundTimes()
	sortEvents(t.Events)
	r.problems = append(r.problems, link(t.Events, ReadOrigins(runDir))...)
	b.checkClaims()
	b.finish()
	t.Problems = r.problems
	if t.Problems == nil {
		t.Problems = []Problem{}
	}
	return t, nil
}

// lineSources are the JSONL sources and the parser of each line.
var lineSources = []struct {
	file  string
	parse func(b *builder, line []byte, n int) error
}{
	{FileAgentTurns, (*builder).turn},
	{FileAudit, (*builder).audit},
	{FileDecisions, (*builder).decision},
}

// readLineSources parses the JSONL sources concurrently (they are the bulk
// of a large run) and merges events, counts and problems in a fixed order
// so the result does not depend on scheduling.
func (b *builder) readLineSources() {
	parts := make([]*builder, len(lineSources))
	var wg sync.WaitGroup
	for i, src := range lineSources {
		p := &builder{t: &Timeline{}, r: &sourceReader{dir: b.r.dir}}
		parts[i] = p
		wg.Go(func() {
			p.count(src.file, p.r.eachLine(src.file, false, func(line []byte, n int) error { return src.parse(p, line, n) }))
		})
	}
	wg.Wait()
	for _, p := range parts {
		b.t.Events = append(b.t.Events, p.t.Events...)
		b.t.Sources = append(b.t.Sources, p.t.Sources...)
		b.r.problems = append(b.r.problems, p.r.problems...)
	}
}

// builder accumulates events from the sources of one run.
type builder struct {
	t *Timeline
	r *sourceReader
}

func (b *builder) add(e Event) {
	e.Schema = Schema
	b.t.Events = append(b.t.Events, e)
}

func (b *builder) count(file string, n int) {
	b.t.Sources = append(b.t.Sources, SourceInfo{File: file, Events: n})
}

// decodeLine decodes one JSONL line into v, requiring a JSON object.
func decodeLine(line []byte, v any) error {
	if line[0] != '{' {
		return fmt.Errorf("not a JSON object")
	}
	return json.Unmarshal(line, v)
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func (b *builder) turn(line []byte, n int) error {
	var l turnLine
	if err := decodeLine(line, &l); err != nil {
		return err
	}
	e := Event{Time: l.Time, DurationMS: l.DurationMS, Source: SourceAgent, OK: boolOr(l.OK, l.Error == ""),
		CorrelationID: normID(l.CorrelationID), Turn: l.Turn, Model: l.Model, ToolsRequested: l.ToolsRequested,
		Error: l.Error, Name: l.Tool, File: FileAgentTurns, Line: n}
	switch l.Kind {
	case "model_request":
		e.Kind = KindModelRequest
		e.Summary = modelSummary(l)
	case "tool_call":
		e.Kind = KindAgentToolCall
		e.Summary = "agent calls " + orDash(l.Tool)
	case "answer_saved":
		e.Kind = KindAnswerSaved
		e.Summary = "answer saved"
	case "error":
		e.Kind = KindAgentError
		e.OK = false
		e.Summary = "agent error: " + orDash(l.Error)
	default:
		return fmt.Errorf("unknown kind %q", l.Kind)
	}
	b.add(e)
	return nil
}

func modelSummary(l turnLine) string {
	s := fmt.Sprintf("turn %d: model %s", l.Turn, orDash(l.Model))
	if !boolOr(l.OK, l.Error == "") {
		return s + " request failed: " + orDash(l.Error)
	}
	if len(l.ToolsRequested) > 0 {
		return s + " asked for " + strings.Join(l.ToolsRequested, ", ")
	}
	return s + " answered"
}

func (b *builder) audit(line []byte, n int) error {
	var l auditLine
	if err := decodeLine(line, &l); err != nil {
		return err
	}
	e := Event{Time: l.Time, DurationMS: l.DurationMS, Source: SourceSidecar, OK: boolOr(l.OK, l.Error == ""),
		CorrelationID: normID(l.CorrelationID), Name: l.Name, Error: l.Error, SessionID: l.SessionID,
		Arguments: compactJSON(l.Arguments), ResultPreview: l.ResultPreview, File: FileAudit, Line: n}
	switch l.Kind {
	case "tools/call":
		e.Kind = KindToolCall
		e.Summary = "tool call " + orDash(l.Name)
	case "resources/read":
		e.Kind = KindResourceRead
		e.Summary = "resource read " + orDash(l.Name)
	case auditCallStart:
		// Folded into the call's event by Build (callstart.go).
		e.Kind = KindCallStart
		e.Summary = "tool call " + orDash(l.Name) + " started"
		b.add(e)
		return nil
	case "invalid_request":
		// The sidecar refused a request before its method was known
		// (unparsable JSON, oversized body): worth a reviewer's eye.
		e.Kind, e.OK = KindInvalidRequest, false
		e.Summary = "invalid MCP request refused: " + orDash(l.Error)
	case "pin_check":
		// A declared MCP server's tool definitions checked at connect:
		// a drift (refused, or allowed with a warning) is in Error.
		e.Kind = KindPinCheck
		e.Summary = "MCP server " + orDash(l.Name) + " tool definitions: " + orDash(l.ResultPreview)
		if !e.OK {
			e.Summary = "MCP server " + orDash(l.Name) + " refused: " + orDash(l.Error)
		}
		b.add(e)
		return nil
	case auditLogFull:
		// The audit log's last line: it filled (or a write failed), and
		// the sidecar refused every call after it.
		e.Kind, e.OK = KindLogFull, false
		e.Summary = orDash(l.Error)
		b.add(e)
		return nil
	default:
		return fmt.Errorf("unknown kind %q", l.Kind)
	}
	if !e.OK && e.Kind != KindInvalidRequest {
		e.Summary += " failed: " + orDash(l.Error)
	}
	b.add(e)
	return nil
}

func (b *builder) decision(line []byte, n int) error {
	var l decisionLine
	if err := decodeLine(line, &l); err != nil {
		return err
	}
	if l.Decision != "allow" && l.Decision != "deny" {
		return fmt.Errorf("decision %q is neither allow nor deny", l.Decision)
	}
	e := Event{Time: l.Time, DurationMS: l.DurationMS, Source: SourceGateway, Kind: KindEgress,
		OK: l.Decision == "allow" && l.Error == "", Error: l.Error, CorrelationID: normID(l.CorrelationID), Client: l.Client,
		Method: l.Method, Host: l.Host, Port: string(l.Port), ResolvedIP: l.ResolvedIP, Decision: l.Decision,
		Rule: l.Rule, Reason: l.Reason, Credential: l.Credential, Scope: l.Scope, BytesUp: l.BytesUp, BytesDown: l.BytesDown, File: FileDecisions, Line: n}
	e.Summary = egressSummary(&e)
	if l.HeldValue != "" {
		// A held credential value seen where it does not belong: an
		// answer that reflected it (scrubbed) is a failure too.
		e.OK = false
		e.Summary += " !! held credential " + l.Credential + ": " + l.HeldValue
	}
	if l.LogFull {
		// The decision log's last line: it filled (or a write failed),
		// and the gateway refused all traffic after it.
		e.Kind, e.OK, e.Summary = KindLogFull, false, orDash(l.Reason)
	}
	b.add(e)
	return nil
}

func egressSummary(e *Event) string {
	target := e.Host
	if e.Port != "" {
		target += ":" + e.Port
	}
	if e.Denied() {
		return fmt.Sprintf("DENY %s %s: %s", e.Method, target, orDash(e.Reason))
	}
	s := fmt.Sprintf("allow %s %s", e.Method, target)
	if e.ResolvedIP != "" {
		s += " -> " + e.ResolvedIP
	}
	if e.Rule != "" {
		s += " (rule " + e.Rule + ")"
	}
	if e.Error != "" {
		s += ", failed upstream: " + e.Error
	}
	return s
}

// normID lower-cases a correlation id so that "ABC" and "abc" join; W3C
// trace-ids are lower-case hex, but a producer's casing must not split a
// story in two.
func normID(id string) string { return strings.ToLower(strings.TrimSpace(id)) }

// compactJSON keeps valid JSON arguments compact (key order as written)
// and turns invalid ones into a JSON string, which keeps timeline.jsonl
// valid whatever the producer wrote.
func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		q, _ := json.Marshal(string(raw))
		return q
	}
	return buf.Bytes()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sortEvents orders events by time; events without a time go last. The sort
// is stable so events at the same instant keep their source order. It sorts
// indices and copies each event once: events are large, and swapping them
// in place dominated the join of a big run.
func sortEvents(ev []Event) {
	idx := make([]int, len(ev))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := ev[i].Time, ev[j].Time
		switch {
		case a.IsZero() != b.IsZero():
			if a.IsZero() {
				return 1
			}
			return -1
		}
		return a.Compare(b)
	})
	sorted := make([]Event, len(ev))
	for k, i := range idx {
		sorted[k] = ev[i]
		sorted[k].Seq = k + 1
	}
	copy(ev, sorted)
}

// agentLocalTools are the agent's own tools, which never reach the
// sidecar (internal/agent ToolSaveAnswer).
var agentLocalTools = map[string]bool{"save_answer": true}

// checkClaims compares what the agent says it called with what the sidecar
// recorded. Threat: agent-turns.jsonl is written by the workload; a
// hostile one can invent tool calls, or hang its own direct egress under a
// made-up call by reusing a correlation id. A successful call the
// sidecar's audit does not have is marked and listed as a problem.
func (b *builder) checkClaims() {
	audited := map[string]bool{}
	for _, e := range b.t.Events {
		if e.Source == SourceSidecar && e.CorrelationID != "" {
			audited[e.CorrelationID] = true
		}
	}
	for i := range b.t.Events {
		e := &b.t.Events[i]
		if e.Kind != KindAgentToolCall || !e.OK || agentLocalTools[e.Name] || audited[e.CorrelationID] {
			continue
		}
		e.Summary += " (not in the sidecar's audit: the agent's claim only)"
		b.r.problem(e.File, e.Line, "the agent records a call to %s (correlation id %s) that the sidecar's audit does not have", orDash(e.Name), orDash(e.CorrelationID))
	}
}

// clockSlack is how far outside the harness's start and end a record's
// time may lie before it is called a claim. Every container reads the
// host's clock, and the harness records the start before the first
// container starts and the end after the last one stopped: the slack only
// covers a writer that rounds its times.
const clockSlack = time.Second

// boundTimes keeps every record's time inside the run the harness recorded.
// Threat: the times in agent-turns.jsonl are the workload's to choose (and
// the sidecar's and gateway's records are written inside the sandbox too):
// a forged early time would become the timeline's origin, move every real
// event by hours, or slip a record into a call's time window. The run's
// start and end come from run-metadata.json only; a record claiming a time
// before the start or after the end is shown at that bound, marked as the
// record's claim, and listed as a problem.
func (b *builder) boundTimes() {
	t := b.t
	if t.Started.IsZero() {
		return // no harness start: finish says so
	}
	for i := range t.Events {
		e := &t.Events[i]
		if e.Time.IsZero() || e.File == FileRunMetadata {
			continue
		}
		var at time.Time
		var where string
		switch {
		case e.Time.Before(t.Started.Add(-clockSlack)):
			at, where = t.Started, fmt.Sprintf("%s before the run's start", t.Started.Sub(e.Time).Round(time.Millisecond))
		case !t.Finished.IsZero() && e.Time.After(t.Finished.Add(clockSlack)):
			at, where = t.Finished, fmt.Sprintf("%s after the run's end", e.Time.Sub(t.Finished).Round(time.Millisecond))
		default:
			continue
		}
		claimed := e.Time.UTC().Format(time.RFC3339Nano)
		b.r.problem(e.File, e.Line, "recorded time %s is %s (%s): the record's claim, shown at that bound", claimed, where, FileRunMetadata)
		e.Summary += " (recorded time " + claimed + " is outside the run: the record's claim)"
		e.Time = at
	}
}

// finish fills the run's bounds from the events when run-metadata.json
// lacks them, and says so: those times were written inside the sandbox.
// The earliest record of the project's own programs (gateway, sidecar) is
// preferred to the workload's (agent), which can claim any time.
func (b *builder) finish() {
	t := b.t
	if t.Started.IsZero() {
		var first, firstOwn time.Time
		for _, e := range t.Events {
			if e.Time.IsZero() {
				continue
			}
			if first.IsZero() || e.Time.Before(first) {
				first = e.Time
			}
			if e.Source != SourceAgent && (firstOwn.IsZero() || e.Time.Before(firstOwn)) {
				firstOwn = e.Time
			}
		}
		t.Started = firstOwn
		if t.Started.IsZero() {
			t.Started = first
		}
		if !t.Started.IsZero() {
			b.r.problem(FileRunMetadata, 0, "no start time from the harness: times are shown from the earliest record, whose time its writer chose")
		}
	}
	if t.Finished.IsZero() {
		for _, e := range t.Events {
			end := e.Time
			if e.Kind == KindPhase {
				end = end.Add(msDuration(e.DurationMS))
			}
			if end.After(t.Finished) {
				t.Finished = end
			}
		}
	}
	if t.Events == nil {
		t.Events = []Event{}
	}
}
