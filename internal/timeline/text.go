package timeline

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
)

// RenderOptions select how [Timeline.Render] prints.
type RenderOptions struct {
	// JSON prints the joined data (the whole [Timeline]) as indented JSON
	// instead of the story.
	JSON bool
	// Color highlights denials and failures with ANSI colours; leave it
	// off when the writer is not a terminal.
	Color bool
	// TimelineOnly skips the run header, checks, phase and container
	// tables, for a caller that printed those itself.
	TimelineOnly bool
}

const (
	ansiRed   = "\x1b[1;31m"
	ansiGreen = "\x1b[32m"
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// Render prints the run's story to w: the verdict, the phase table, then
// the timeline with each call's egress indented under it and denials
// marked "!!".
func (t *Timeline) Render(w io.Writer, opts RenderOptions) error {
	if opts.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(t); err != nil {
			return fmt.Errorf("encoding timeline: %w", err)
		}
		return nil
	}
	// Every string printed comes from the run's records, which the
	// workload wrote in part: only the printer's own colours pass.
	allowed := []string{}
	if opts.Color {
		allowed = termtext.Colours
	}
	p := &printer{w: termtext.NewWriter(w, allowed...), color: opts.Color, t: t}
	if !opts.TimelineOnly {
		p.header()
		p.phases()
		p.containers()
	}
	p.events()
	p.probes()
	p.problems()
	p.printf("\nFull report: %s\n", filepath.Join(t.Dir, FileReport))
	return p.err
}

// printer writes the story, remembering the first write error.
type printer struct {
	w     io.Writer
	color bool
	t     *Timeline
	err   error
}

// text is what the printer composed itself: its own words and colours
// around fields already made single-line ([field]). It passes whole.
// Every other string the printer is given comes from a record, and the
// records are written inside the sandbox (the agent's turns by the
// workload itself): such a string is escaped to one line (termtext.Line),
// so a "\n" in it cannot start a row that looks like the printer's.
type text string

// field makes a record's string safe for one line of the story.
func field(s string) text { return text(termtext.Line(s)) }

// oneLine escapes every argument that is not the printer's own text.
func oneLine(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case text:
			out[i] = string(v)
		case string:
			out[i] = termtext.Line(v)
		case error:
			out[i] = termtext.Line(v.Error())
		case fmt.Stringer:
			out[i] = termtext.Line(v.String())
		default:
			out[i] = a
		}
	}
	return out
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, oneLine(args)...)
	}
}

// row writes one row of a table, escaped like printf.
func row(tw io.Writer, format string, args ...any) {
	fmt.Fprintf(tw, format, oneLine(args)...)
}

func (p *printer) paint(code string, s text) text {
	if !p.color {
		return s
	}
	return text(code) + s + ansiReset
}

func (p *printer) okText(ok bool) text {
	if ok {
		return p.paint(ansiGreen, "ok")
	}
	return p.paint(ansiRed, "FAIL")
}

func (p *printer) header() {
	t := p.t
	p.printf("Run %s (%s)\n", t.RunID, orDash(t.Command))
	verdict := text("none recorded")
	if t.Verdict != nil {
		verdict = map[bool]text{true: p.paint(ansiGreen, "OK"), false: p.paint(ansiRed, "FAILED")}[t.Verdict.OK]
	}
	p.printf("verdict: %s", verdict)
	if t.ExitCode != nil {
		p.printf("   exit code %d", *t.ExitCode)
	}
	p.printf("\n")
	if !t.Started.IsZero() {
		p.printf("started %s   took %s\n", t.Started.UTC().Format(time.RFC3339), fmtDur(t.Finished.Sub(t.Started)))
	}
	s := t.Stats()
	p.printf("tool calls %d (%d failed), resource reads %d, model requests %d, egress allowed %d, denied %d, unattributed %d\n",
		s.ToolCalls, s.FailedCalls, s.ResourceReads, s.ModelRequests, s.Allowed, s.Denied, s.Unlinked)
	if t.Image.Tag != "" {
		p.printf("image %s (%s)\n", t.Image.Tag, imageHow(t.Image))
	}
	for _, d := range t.Degradations {
		p.printf("degraded: %s\n", degradationText(d))
	}
	for _, c := range t.Credentials {
		p.printf("credential %s for %s: %s\n", c.Variable, orDash(c.Host), c.Where())
	}
	if t.Verdict != nil && len(t.Verdict.Checks) > 0 {
		p.printf("\nChecks\n")
		for _, c := range t.Verdict.Checks {
			p.printf("  %-4s  %s  %s\n", p.okText(c.OK), c.Name, c.Detail)
		}
	}
}

func (p *printer) phases() {
	if len(p.t.Phases) == 0 {
		return
	}
	p.printf("\nPhases\n")
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  PHASE\tSTART\tDURATION\tRESULT\n")
	for _, ph := range p.t.Phases {
		res := p.okText(ph.OK)
		if ph.Error != "" {
			res += " " + field(ph.Error)
		}
		row(tw, "  %s\t%s\t%s\t%s\n", ph.Name, p.rel(ph.Start), fmtMS(ph.DurationMS), res)
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

func (p *printer) containers() {
	if len(p.t.Containers) == 0 {
		return
	}
	p.printf("\nContainers\n")
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  ROLE\tNAME\tNETWORKS\tPEAK MEMORY\tEXIT\n")
	for _, c := range p.t.Containers {
		state := text("?")
		if c.ExitCode != nil {
			state = text(exitText(*c.ExitCode) + killNote(c))
			if *c.ExitCode != 0 {
				state = p.paint(ansiRed, state)
			}
		}
		mem := "-"
		if c.PeakMemoryBytes > 0 {
			mem = fmtBytes(c.PeakMemoryBytes)
		}
		row(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Role, c.Name, strings.Join(c.Networks, ","), mem, state)
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

// rel formats t relative to the run's start.
func (p *printer) rel(t time.Time) string {
	if t.IsZero() || p.t.Started.IsZero() {
		return "       ?"
	}
	return fmt.Sprintf("%+8.3fs", t.Sub(p.t.Started).Seconds())
}

func (p *printer) events() {
	ev := p.t.Events
	if len(ev) == 0 {
		p.printf("\nTimeline: no events\n")
		return
	}
	children := childrenOf(ev)
	p.printf("\nTimeline (time since start, source, event)\n")
	for i := range ev {
		if ev[i].Parent != 0 {
			continue
		}
		p.event(&ev[i], text("  "+p.rel(ev[i].Time)+"  "))
		for _, c := range children[ev[i].Seq] {
			p.event(&ev[c], "               └ ")
		}
	}
}

// childrenOf maps a parent's Seq to its children's indices, in time order.
func childrenOf(ev []Event) map[int][]int {
	m := map[int][]int{}
	for i := range ev {
		if ev[i].Parent != 0 {
			m[ev[i].Parent] = append(m[ev[i].Parent], i)
		}
	}
	return m
}

func (p *printer) event(e *Event, prefix text) {
	line := text(fmt.Sprintf("%-8s %s", field(e.Source), field(e.Summary)))
	if e.DurationMS > 0 && e.Kind != KindPhase && !e.Denied() {
		line += text("  " + fmtMS(e.DurationMS))
	}
	if e.Kind == KindEgress && (e.BytesUp > 0 || e.BytesDown > 0) {
		line += text(fmt.Sprintf("  up %s down %s", fmtBytes(e.BytesUp), fmtBytes(e.BytesDown)))
	}
	if e.LinkedBy == LinkTimeWindow {
		line += "  (linked by time)"
	}
	if e.CorrelationID != "" && e.Parent == 0 {
		line += "  " + p.paint(ansiDim, "["+field(shortID(e.CorrelationID))+"]")
	}
	mark := text("   ")
	if e.Denied() || !e.OK || e.Warning != "" {
		mark = "!! "
		line = p.paint(ansiRed, line)
	}
	p.printf("%s%s%s\n", prefix, mark, line)
}

func (p *printer) probes() {
	r := p.t.Probe
	if r == nil {
		return
	}
	pass, violation, other := r.Tally()
	p.printf("\nProbes: %d pass, %d violation, %d unsupported or unknown\n", pass, violation, other)
	for _, g := range r.Groups {
		p.printf("  %s %s\n", g.ID, g.Title)
		for _, pr := range g.Probes {
			v := field(pr.Verdict)
			if pr.Class() == ClassViolation {
				v = p.paint(ansiRed, "!! "+v)
			}
			p.printf("    %-8s %-40s %s  %s\n", pr.ID, pr.Title, v, pr.Reason)
		}
	}
}

func (p *printer) problems() {
	if len(p.t.Problems) == 0 {
		return
	}
	p.printf("\nProblems reading the run directory\n")
	for _, pr := range p.t.Problems {
		p.printf("  %s\n", pr.String())
	}
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func fmtMS(ms float64) string { return fmtDur(time.Duration(ms * float64(time.Millisecond))) }

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func fmtBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
}

// imageHow says how the run got its image.
func imageHow(i ImageInfo) string {
	switch {
	case i.Method != "":
		return i.Method
	case i.Built:
		return "built"
	}
	return "reused"
}
