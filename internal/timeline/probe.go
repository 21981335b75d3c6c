package timeline

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ProbeReport is the probe suite's report.json. The probe package owns the
// format (the seed's bare array of groups, each with capabilities that
// carry a verdict); it is read generically here, field by field with
// fallbacks, so the report renders whatever version wrote it and this
// package need not import the probe suite.
type ProbeReport struct {
	Groups []ProbeGroup `json:"groups"`
}

// ProbeGroup is one group of probes (G01 ...).
type ProbeGroup struct {
	ID     string  `json:"id,omitempty"`
	Title  string  `json:"title"`
	Probes []Probe `json:"probes"`
}

// Probe is one probe's result.
type Probe struct {
	ID       string `json:"id,omitempty"`
	Title    string `json:"title"`
	Verdict  string `json:"verdict"`
	Reason   string `json:"reason,omitempty"`
	Threat   string `json:"threat,omitempty"`
	Expected string `json:"expected,omitempty"`
	Outcome  string `json:"outcome,omitempty"` // what the tool path yielded
}

// Verdict classes of a probe.
const (
	ClassPass      = "pass"
	ClassViolation = "violation"
	ClassOther     = "other" // unsupported, or a verdict this package does not know
)

// Class sorts the probe's verdict into pass, violation or other. An
// unknown verdict is never counted as a pass.
func (p Probe) Class() string {
	switch strings.ToLower(p.Verdict) {
	case "pass", "passed", "ok":
		return ClassPass
	case "violation", "fail", "failed":
		return ClassViolation
	}
	return ClassOther
}

// Tally counts the report's probes per verdict class.
func (r *ProbeReport) Tally() (pass, violation, other int) {
	for _, g := range r.Groups {
		for _, p := range g.Probes {
			switch p.Class() {
			case ClassPass:
				pass++
			case ClassViolation:
				violation++
			default:
				other++
			}
		}
	}
	return pass, violation, other
}

// Counts returns the number of probes per verdict, sorted by verdict.
func (r *ProbeReport) Counts() []VerdictCount {
	m := map[string]int{}
	for _, g := range r.Groups {
		for _, p := range g.Probes {
			m[p.Verdict]++
		}
	}
	out := make([]VerdictCount, 0, len(m))
	for v, n := range m {
		out = append(out, VerdictCount{Verdict: v, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Verdict < out[j].Verdict })
	return out
}

// VerdictCount is how many probes got one verdict.
type VerdictCount struct {
	Verdict string
	Count   int
}

func (b *builder) readProbe() *ProbeReport {
	var raw any
	// A test-sandbox run without its report is a finding in itself.
	if !b.r.readJSON(FileProbeReport, b.t.Command == "test-sandbox", &raw) {
		return nil
	}
	groups, _ := raw.([]any)
	if m, ok := raw.(map[string]any); ok {
		groups, _ = first(m, "groups").([]any)
	}
	r := &ProbeReport{}
	for i, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			b.r.problem(FileProbeReport, 0, "group %d is not an object", i)
			continue
		}
		r.Groups = append(r.Groups, ProbeGroup{ID: str(gm, "id"), Title: str(gm, "title", "name", "id"),
			Probes: probes(first(gm, "capabilities", "probes", "checks"))})
	}
	if len(r.Groups) == 0 {
		b.r.problem(FileProbeReport, 0, "no probe groups found")
	}
	return r
}

func probes(v any) []Probe {
	list, _ := v.([]any)
	var ps []Probe
	for _, item := range list {
		m, _ := item.(map[string]any)
		if m == nil {
			continue
		}
		p := Probe{ID: str(m, "id"), Title: str(m, "title", "name", "id"), Verdict: str(m, "verdict", "status"),
			Reason: str(m, "verdict_reason", "reason", "detail"), Threat: str(m, "threat"),
			Expected: str(m, "expected")}
		if tool, ok := m["tool"].(map[string]any); ok {
			p.Outcome = str(tool, "outcome")
		}
		ps = append(ps, p)
	}
	return ps
}

func first(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			return v
		}
	}
	return nil
}

// str returns the first present key as text; a non-string is shown as
// compact JSON so no detail is silently dropped.
func str(m map[string]any, keys ...string) string {
	switch v := first(m, keys...).(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}
