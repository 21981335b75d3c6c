//go:build linux

package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Probe is one entry of the catalogue.
type Probe struct {
	Group string // "G01"
	ID    string // "T01"
	Title string
	// Goal is the catalogue's goal; Adjust, when set, refines it from the
	// context (capabilities, allowlist, configured targets).
	Goal   Goal
	Adjust func(*Context) Goal
	// Threat is what the probe answers: the attack it would reveal.
	Threat string
	// Spawn marks probes that need process spawning: the spec's
	// shell_access turns their deny goal into "any".
	Spawn bool
	// Shell is the seed's Linux shell command; Alternates its bypasses.
	Shell      string
	Alternates []Alternate
	// Tool is the in-process attempt, the primary path.
	Tool func(ctx context.Context, e *Env) Result
}

// goal is the probe's goal under context c.
func (p *Probe) goal(c *Context) Goal {
	g := p.Goal
	if p.Adjust != nil {
		g = p.Adjust(c)
	}
	if p.Spawn && g == GoalDeny && c.ShellAccess() {
		g = GoalAny
	}
	return g
}

// GroupInfo names a group of the catalogue.
type GroupInfo struct{ ID, Title string }

// Options configure one run of the suite.
type Options struct {
	// OutDir receives status.ndjson, report.json and done.json.
	OutDir            string
	SerializeEvidence bool
	// Groups and Probes default to the full catalogue.
	Groups []GroupInfo
	Probes []Probe
	// ToolTimeout bounds each tool path (default 20 s).
	ToolTimeout time.Duration
	// Progress, when set, gets one line per group as it starts.
	Progress io.Writer
	// Self is the binary the spawn probes execute (default: this one).
	Self string
	// Snapshot is what was read before hardening ([TakeSnapshot]).
	Snapshot *Snapshot
}

// Env is what a tool path works with.
type Env struct {
	Ctx *Context
	// Self is the path of this binary, for spawn probes.
	Self string
	// Snap is what was read before hardening, or nil.
	Snap *Snapshot
}

// Run runs the suite in order, appending live progress to status.ndjson,
// and writes report.json and done.json atomically.
func Run(ctx context.Context, c *Context, opts Options) (*Report, error) {
	if opts.Groups == nil {
		opts.Groups, opts.Probes = Groups(), Catalogue()
	}
	if opts.ToolTimeout == 0 {
		opts.ToolTimeout = 20 * time.Second
	}
	st, err := os.OpenFile(filepath.Join(opts.OutDir, runs.FileProbeStatus), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening status.ndjson: %w", err)
	}
	defer st.Close()
	if opts.Self == "" {
		opts.Self, _ = os.Executable()
	}
	env := &Env{Ctx: c, Self: opts.Self, Snap: opts.Snapshot}
	prepareFixtures(c)
	rep := &Report{}
	for _, g := range opts.Groups {
		rep.Groups = append(rep.Groups, runGroup(ctx, env, g, opts, &status{w: st}))
	}
	return rep, writeOutputs(rep, opts)
}

func runGroup(ctx context.Context, env *Env, g GroupInfo, opts Options, st *status) Group {
	st.emit(event{Type: "group_started", GroupID: g.ID, GroupTitle: g.Title, Message: g.ID + " " + g.Title})
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "%s %s\n", g.ID, g.Title)
	}
	out := Group{ID: g.ID, Title: g.Title, Capabilities: []Capability{}}
	for i := range opts.Probes {
		if p := &opts.Probes[i]; p.Group == g.ID {
			out.Capabilities = append(out.Capabilities, runProbe(ctx, env, p, opts, st))
		}
	}
	return out
}

func runProbe(ctx context.Context, env *Env, p *Probe, opts Options, st *status) Capability {
	ev := event{CapabilityID: p.ID, CapabilityTitle: p.Title, GroupID: p.Group}
	st.emit(ev.with("capability_started", "", ""))
	c := Capability{ID: p.ID, Title: p.Title, Threat: p.Threat}
	c.Shell = shellResult(ctx, p.Shell)
	st.emit(ev.with("shell_completed", c.Shell.Outcome, c.Shell.Summary))
	c.Tool = runTool(ctx, env, p, opts.ToolTimeout)
	st.emit(ev.with("tool_completed", c.Tool.Outcome, c.Tool.Summary))
	c.Alternates = runAlternates(ctx, p.Alternates)
	st.emit(ev.with("alternates_completed", c.Alternates.Outcome, c.Alternates.Summary))
	Judge(p.goal(env.Ctx), &c)
	done := ev.with("capability_completed", c.Tool.Outcome, c.VerdictReason)
	done.Verdict = c.Verdict
	st.emit(done)
	return c
}

// runTool runs the tool path with a timeout, turning a panic into an Error
// so one broken probe cannot end the suite.
func runTool(ctx context.Context, env *Env, p *Probe, timeout time.Duration) (r Result) {
	if p.Tool == nil {
		return na("No in-process path is implemented for this capability.")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			r = errored("The tool path panicked.", fmt.Sprint(v))
		}
	}()
	return p.Tool(ctx, env)
}

func writeOutputs(rep *Report, opts Options) error {
	data, err := rep.Encode(opts.SerializeEvidence)
	if err != nil {
		return err
	}
	if err := writeAtomic(opts.OutDir, runs.FileProbeReport, data); err != nil {
		return err
	}
	done, err := json.MarshalIndent(map[string]string{
		"outcome": "completed", "report_path": filepath.Join(opts.OutDir, runs.FileProbeReport),
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding done.json: %w", err)
	}
	return writeAtomic(opts.OutDir, runs.FileProbeDone, append(done, '\n'))
}

// event is one line of status.ndjson (the seed's fields; never evidence).
type event struct {
	Type            string  `json:"event_type"`
	Timestamp       string  `json:"timestamp_utc"`
	GroupID         string  `json:"group_id,omitempty"`
	GroupTitle      string  `json:"group_title,omitempty"`
	Message         string  `json:"message,omitempty"`
	CapabilityID    string  `json:"capability_id,omitempty"`
	CapabilityTitle string  `json:"capability_title,omitempty"`
	Outcome         Outcome `json:"outcome,omitempty"`
	Summary         string  `json:"summary,omitempty"`
	Verdict         Verdict `json:"verdict,omitempty"`
}

func (e event) with(typ string, o Outcome, summary string) event {
	e.Type, e.Outcome, e.Summary = typ, o, summary
	return e
}

type status struct{ w io.Writer }

// emit appends one event; progress is best effort and never stops the suite.
func (s *status) emit(e event) {
	e.Timestamp = time.Now().UTC().Format(time.RFC3339Nano)
	data, err := json.Marshal(e)
	if err == nil {
		_, _ = s.w.Write(append(data, '\n'))
	}
}
