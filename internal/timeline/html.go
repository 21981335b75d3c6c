package timeline

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/version"
)

var (
	//go:embed report.html.tmpl
	reportTemplate string
	//go:embed report.css
	reportCSS string
	//go:embed report.js
	reportJS string
)

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"short": shortID,
	"size":  fmtBytes,
	"join":  func(s []string) string { return strings.Join(s, ", ") },
	"add": func(n ...int) int {
		sum := 0
		for _, x := range n {
			sum += x
		}
		return sum
	},
}).Parse(reportTemplate))

// reportCSP is the report's Content-Security-Policy. The report is opened
// from disk by reviewers and shows strings the workload controlled, so even
// if escaping were ever bypassed nothing may load or run: no network
// fetches at all, and only the one script whose hash is pinned here.
var reportCSP = func() string {
	sum := sha256.Sum256([]byte(reportJS))
	return "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-" +
		base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'"
}()

// WriteHTML writes report.html: one self-contained page (inline CSS and
// script, no fetches) with the run's topology, phase waterfall, timeline
// and probe results. Every value is escaped by html/template.
func (t *Timeline) WriteHTML(w io.Writer) error {
	var buf bytes.Buffer
	if err := reportTmpl.Execute(&buf, t.view()); err != nil {
		return fmt.Errorf("rendering report.html: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing report.html: %w", err)
	}
	return nil
}

// htmlView is what the template renders.
type htmlView struct {
	T            *Timeline
	CSP          string
	Style        template.CSS
	Script       template.JS
	Version      string
	Schema       string
	Stats        Stats
	StartedText  string
	Duration     string
	Degradations []string
	Networks     []netView
	Destinations []destView
	Phases       []phaseView
	Rows         []rowView
	OmittedRows  int
	ExitOK       bool
	ImageHow     string

	ProbePass, ProbeViolations, ProbeOther int

	// The summary at the top.
	Headline         Headline
	Question         string
	QuestionRecorded bool
	Hardening        []hardView
	Softenings       []softGroup
	Credentials      []credView
	Denials          DenialSummary
	ChecksOpen       bool
	ChecksPassed     int
	ProbeGroups      []probeGroupView
	// ProbeFilter is the verdict filter checked when the page opens:
	// violations when there are any, else all.
	ProbeFilter string
}

// credView is where one credential of the run lived.
type credView struct {
	Variable, Host, Where string
	InSandbox             bool
}

type netView struct {
	Name       string
	Internal   bool
	Containers []ctrView
}

type ctrView struct {
	Role, Name, State, Memory string
	Aliases                   []string
	Bad                       bool
}

type destView struct {
	Target, IPs, Why, Bytes string
	Allowed, Denied         int
	// Expected counts the denials the run caused on purpose.
	Expected  int
	up, down  int64
	ips, whys []string
}

type phaseView struct {
	Name, Start, Dur, Error string
	Left, Width             string
	OK                      bool
}

type rowView struct {
	E          *Event
	Rel, Dur   string
	Bytes      string
	Args       string
	Flagged    bool
	Expandable bool
	Open       bool
	Children   []rowView
	// MoreChildren counts linked events not shown under this row.
	MoreChildren int
	// Expected marks a denial the run caused on purpose, and why.
	Expected    bool
	ExpectedWhy string

	ChildDenied bool
}

func (t *Timeline) view() *htmlView {
	v := &htmlView{T: t, CSP: reportCSP, Style: template.CSS(reportCSS), Script: template.JS(reportJS),
		Version: version.Version, Schema: Schema, Stats: t.Stats(), Duration: fmtDur(t.Finished.Sub(t.Started))}
	v.ExitOK = t.ExitCode != nil && *t.ExitCode == 0
	v.ImageHow = imageHow(t.Image)
	if !t.Started.IsZero() {
		v.StartedText = t.Started.UTC().Format("2006-01-02 15:04:05.000 MST")
	}
	for _, d := range t.Degradations {
		v.Degradations = append(v.Degradations, degradationText(d))
	}
	v.Networks = t.networkViews()
	v.Destinations = t.destinations()
	v.Phases = t.phaseViews()
	v.Rows, v.OmittedRows = t.rows()
	if t.Probe != nil {
		v.ProbePass, v.ProbeViolations, v.ProbeOther = t.Probe.Tally()
		v.ProbeGroups = probeGroupViews(t.Probe)
		v.ProbeFilter = "all"
		if v.ProbeViolations > 0 {
			v.ProbeFilter = "violation"
		}
	}
	v.Headline = t.Headline()
	v.Question, v.QuestionRecorded = t.QuestionText()
	for _, h := range t.Hardening {
		v.Hardening = append(v.Hardening, hardViewOf(h))
	}
	v.Softenings = softGroups(t.Softenings)
	for _, c := range t.Credentials {
		v.Credentials = append(v.Credentials, credView{Variable: c.Variable, Host: orDash(c.Host), Where: c.Where(), InSandbox: c.Lives != CredentialInGateway})
	}
	v.Denials = t.Denials()
	if t.Verdict != nil {
		for _, c := range t.Verdict.Checks {
			if c.OK {
				v.ChecksPassed++
			} else {
				v.ChecksOpen = true
			}
		}
	}
	return v
}

// degradationText shows a degradation: a string as is, anything else as JSON.
func degradationText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func (t *Timeline) networkViews() []netView {
	var out []netView
	placed := map[string]bool{}
	for _, n := range t.Networks {
		nv := netView{Name: n.Name, Internal: n.Internal}
		for _, c := range t.Containers {
			for _, cn := range c.Networks {
				if cn == n.Name {
					nv.Containers = append(nv.Containers, ctrViewOf(c))
					placed[c.Name] = true
				}
			}
		}
		out = append(out, nv)
	}
	var loose []ctrView
	for _, c := range t.Containers {
		if !placed[c.Name] {
			loose = append(loose, ctrViewOf(c))
		}
	}
	if len(loose) > 0 {
		out = append(out, netView{Name: "(no recorded network)", Internal: true, Containers: loose})
	}
	return out
}

func ctrViewOf(c ContainerInfo) ctrView {
	v := ctrView{Role: orDash(c.Role), Name: c.Name, Aliases: c.Aliases, State: "exit code unknown"}
	if c.ExitCode != nil {
		v.State = exitText(*c.ExitCode) + killNote(c)
		v.Bad = *c.ExitCode != 0
	}
	if c.PeakMemoryBytes > 0 {
		v.Memory = fmtBytes(c.PeakMemoryBytes)
	}
	return v
}

// destinations summarises the decision log per requested host:port.
func (t *Timeline) destinations() []destView {
	at := map[string]*destView{}
	var order []string
	for i := range t.Events {
		e := &t.Events[i]
		if e.Kind != KindEgress {
			continue
		}
		key := e.Method + " " + e.Host + ":" + e.Port
		d, ok := at[key]
		if !ok {
			d = &destView{Target: key}
			at[key] = d
			order = append(order, key)
		}
		if e.Denied() {
			d.Denied++
			if exp, _ := t.ExpectedDenial(e); exp {
				d.Expected++
			}
			d.whys = addUnique(d.whys, "denied: "+orDash(e.Reason))
		} else {
			d.Allowed++
			d.whys = addUnique(d.whys, "rule "+orDash(e.Rule))
		}
		if e.ResolvedIP != "" {
			d.ips = addUnique(d.ips, e.ResolvedIP)
		}
		d.up += e.BytesUp
		d.down += e.BytesDown
	}
	out := make([]destView, 0, len(order))
	for _, k := range order {
		d := at[k]
		d.IPs, d.Why = strings.Join(d.ips, ", "), strings.Join(d.whys, "; ")
		if d.up+d.down > 0 {
			d.Bytes = fmtBytes(d.up) + " / " + fmtBytes(d.down)
		}
		out = append(out, *d)
	}
	// Unexpected denials first, then expected ones: what a reviewer looks
	// for.
	rank := func(d destView) int {
		switch {
		case d.Denied > d.Expected:
			return 0
		case d.Denied > 0:
			return 1
		}
		return 2
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

func addUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	if len(list) >= 5 {
		return list
	}
	return append(list, s)
}

func (t *Timeline) phaseViews() []phaseView {
	total := t.Finished.Sub(t.Started)
	var out []phaseView
	for _, p := range t.Phases {
		d := time.Duration(p.DurationMS * float64(time.Millisecond))
		left, width := 0.0, 100.0
		if total > 0 && !p.Start.IsZero() {
			left = clamp(100*float64(p.Start.Sub(t.Started))/float64(total), 0, 100)
			width = clamp(100*float64(d)/float64(total), 0, 100-left)
		}
		out = append(out, phaseView{Name: p.Name, Start: relText(t.Started, p.Start), Dur: fmtDur(d),
			Error: p.Error, OK: p.OK, Left: fmt.Sprintf("%.3f", left), Width: fmt.Sprintf("%.3f", width)})
	}
	return out
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(hi, x)) }

func relText(start, at time.Time) string {
	if at.IsZero() || start.IsZero() {
		return "?"
	}
	return fmt.Sprintf("+%.3fs", at.Sub(start).Seconds())
}

// Bounds on what report.html shows. A page with tens of thousands of
// expandable rows is neither readable nor quick to write; timeline.jsonl
// keeps every event, and the page says how many it left out.
const (
	maxReportRows     = 2000 // top-level timeline rows
	maxReportChildren = 100  // linked events under one row
)

// rows returns the timeline's top-level rows with their linked events.
// Past maxReportRows, failures and denials are kept first, then ordinary
// rows in time order: the page must never drop what a reviewer looks for.
func (t *Timeline) rows() (rows []rowView, omitted int) {
	children := childrenOf(t.Events)
	var roots []int
	flagged := map[int]bool{}
	for i := range t.Events {
		e := &t.Events[i]
		if e.Parent != 0 {
			continue
		}
		roots = append(roots, i)
		if !e.OK || anyNotOK(t.Events, children[e.Seq]) {
			flagged[i] = true
		}
	}
	keep := selectRows(roots, flagged, maxReportRows)
	for _, i := range roots {
		if keep[i] {
			rows = append(rows, t.rootRow(&t.Events[i], children[t.Events[i].Seq]))
		}
	}
	return rows, len(roots) - len(rows)
}

func anyNotOK(ev []Event, idx []int) bool {
	for _, c := range idx {
		if !ev[c].OK {
			return true
		}
	}
	return false
}

// selectRows picks at most limit roots, flagged ones first.
func selectRows(roots []int, flagged map[int]bool, limit int) map[int]bool {
	keep := map[int]bool{}
	for _, pass := range []bool{true, false} {
		for _, i := range roots {
			if len(keep) >= limit {
				return keep
			}
			if flagged[i] == pass {
				keep[i] = true
			}
		}
	}
	return keep
}

func (t *Timeline) rootRow(e *Event, children []int) rowView {
	r := t.row(e)
	for n, c := range children {
		if n == maxReportChildren {
			r.MoreChildren = len(children) - n
			break
		}
		cr := t.row(&t.Events[c])
		r.Children = append(r.Children, cr)
		r.ChildDenied = r.ChildDenied || (cr.Flagged && !cr.Expected)
	}
	r.Expandable = len(r.Children) > 0 || r.Args != "" || e.ResultPreview != "" || e.Error != "" ||
		e.Kind == KindToolCall || e.Kind == KindResourceRead || e.Kind == KindModelRequest
	// A call that failed or caused a denial opens by itself: it is what
	// the reviewer came for.
	r.Open = r.Flagged || r.ChildDenied
	r.Flagged = r.Flagged || r.ChildDenied
	return r
}

func (t *Timeline) row(e *Event) rowView {
	r := rowView{E: e, Rel: relText(t.Started, e.Time), Flagged: !e.OK || e.Warning != ""}
	r.Expected, r.ExpectedWhy = t.ExpectedDenial(e)
	if e.DurationMS > 0 && e.Kind != KindPhase && !e.Denied() {
		r.Dur = fmtMS(e.DurationMS)
	}
	if e.BytesUp > 0 || e.BytesDown > 0 {
		r.Bytes = "↑" + fmtBytes(e.BytesUp) + " ↓" + fmtBytes(e.BytesDown)
	}
	if len(e.Arguments) > 0 {
		var pretty bytes.Buffer
		if json.Indent(&pretty, e.Arguments, "", "  ") == nil {
			r.Args = pretty.String()
		} else {
			r.Args = string(e.Arguments)
		}
	}
	return r
}
