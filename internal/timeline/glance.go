package timeline

import (
	"fmt"
	"sort"
	"strings"
)

// What a reviewer reads first: the question the run asked, why its verdict
// is what it is (one sentence, derived from the record), the hardening in
// force per container, the softenings the spec granted, and which of the
// gateway's denials the run caused on purpose.

// ContainerHardening is the hardening of one container as the run directory
// records it, from three sources of different weight: the role's own
// report (a claim written where the workload can write), what the host
// read of the role's process from outside (the kernel's account), and the
// container configuration the harness asked Docker for.
type ContainerHardening struct {
	Role string `json:"role"`
	// Report is the role's harden report as run-metadata.json carries it.
	Report *RoleReport `json:"report,omitempty"`
	// Observed is what the host read of the process (/proc/<pid>/status).
	Observed *Observation `json:"observed,omitempty"`
	// Config is the container's configuration from resolved-profile.json.
	Config *ContainerConfig `json:"config,omitempty"`
}

// RoleReport is a role's claim about the layers it applied.
type RoleReport struct {
	Source       string           `json:"source,omitempty"`
	ABI          int              `json:"abi"`
	KernelABI    int              `json:"kernel_abi"`
	Layers       []HardeningLayer `json:"layers"`
	Degradations []string         `json:"degradations,omitempty"`
	Error        string           `json:"error,omitempty"`
}

// HardeningLayer is one layer of a role's hardening.
type HardeningLayer struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Enforced bool   `json:"enforced"`
	Detail   string `json:"detail,omitempty"`
}

// Observation is a role's process as the host read it.
type Observation struct {
	Seen           bool   `json:"seen"`
	Seccomp        int    `json:"seccomp"`
	SeccompFilters int    `json:"seccomp_filters"`
	NoNewPrivs     bool   `json:"no_new_privs"`
	CapEff         string `json:"cap_eff"`
	UID            int    `json:"uid"`
	Detail         string `json:"detail,omitempty"`
}

// ContainerConfig is what the harness asked Docker for.
type ContainerConfig struct {
	User           string   `json:"user,omitempty"`
	ReadOnlyRootFS bool     `json:"readonly_rootfs"`
	CapDrop        []string `json:"cap_drop,omitempty"`
	CapAdd         []string `json:"cap_add,omitempty"`
	SecurityOpt    []string `json:"security_opt,omitempty"`
}

// Softening is one entry of the spec's softening ledger: what a capability
// (or the spec's own allowlists) opened, and in which layer.
type Softening struct {
	Capability string `json:"capability"`
	Layer      string `json:"layer"`
	What       string `json:"what"`
}

// readGlance reads what the summary at the top of the report needs beyond
// the events: the question and each role's hardening from
// run-metadata.json, the container configuration and the softening ledger
// from resolved-profile.json. Both files were read already (and their
// problems reported); a second read here only picks other fields.
func (b *builder) readGlance() {
	var m struct {
		Question  string                 `json:"question"`
		Hardening map[string]*RoleReport `json:"hardening"`
		Observed  map[string]Observation `json:"observed"`
	}
	quiet := &sourceReader{dir: b.r.dir} // problems were reported by the first read
	quiet.readJSON(FileRunMetadata, false, &m)
	var prof struct {
		Containers map[string]*ContainerConfig `json:"containers"`
		Ledger     []Softening                 `json:"softening_ledger"`
	}
	quiet.readJSON(FileResolvedProfile, false, &prof)
	t := b.t
	t.Question = m.Question
	t.Softenings = prof.Ledger
	roles := map[string]*ContainerHardening{}
	var order []string
	get := func(role string) *ContainerHardening {
		if h, ok := roles[role]; ok {
			return h
		}
		h := &ContainerHardening{Role: role}
		roles[role] = h
		order = append(order, role)
		return h
	}
	for _, c := range t.Containers {
		if m.Hardening[c.Role] != nil || hasKey(m.Observed, c.Role) || prof.Containers[c.Role] != nil {
			get(c.Role)
		}
	}
	for _, role := range sortedKeys(m.Hardening) {
		get(role).Report = m.Hardening[role]
	}
	for _, role := range sortedKeys(m.Observed) {
		o := m.Observed[role]
		get(role).Observed = &o
	}
	for _, role := range sortedKeys(prof.Containers) {
		if prof.Containers[role] != nil {
			get(role).Config = prof.Containers[role]
		}
	}
	for _, role := range order {
		t.Hardening = append(t.Hardening, *roles[role])
	}
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Headline is the verdict with its reason, in one sentence.
type Headline struct {
	// Class is "ok", "bad" or "warn" (no verdict recorded).
	Class    string `json:"class"`
	Sentence string `json:"sentence"`
}

// Headline says in one sentence why the run's verdict is what it is,
// naming the first cause the record shows: an isolation violation, an
// unreachable model endpoint (and who refused it), a killed container, the
// agent's own error, a failed phase, then a failed verdict check.
func (t *Timeline) Headline() Headline {
	if h, ok := t.failure(); ok {
		return h
	}
	if t.Verdict == nil {
		if t.Command == "" && t.Started.IsZero() {
			return Headline{"warn", "No verdict: run-metadata.json is missing or unreadable, so this directory does not say how the run ended."}
		}
		return Headline{"warn", "No verdict was recorded: the run did not finish (interrupted, or the harness died before writing it)."}
	}
	if !t.Verdict.OK {
		return Headline{"bad", "The verdict failed, but no recorded check, phase or event says why."}
	}
	n := len(t.Verdict.Checks)
	switch t.Command {
	case "doctor":
		return Headline{"ok", fmt.Sprintf("The sandbox works end to end: all %d checks passed.", n)}
	case "test-sandbox":
		if t.Probe != nil {
			pass, _, other := t.Probe.Tally()
			return Headline{"ok", fmt.Sprintf("No isolation violation: %d probes ran from inside the sandbox, %d passed and %d could not be tested here (unsupported).", pass+other, pass, other)}
		}
	case "run":
		s := t.Stats()
		calls := plural(s.ToolCalls, "tool call")
		if s.ResourceReads > 0 {
			calls += " and " + plural(s.ResourceReads, "resource read")
		}
		sentence := fmt.Sprintf("The agent answered after %s, %s, and all %d verdict checks passed", plural(s.ModelRequests, "model request"), calls, n)
		if d := t.Denials(); len(d.Unexpected) > 0 {
			sentence += fmt.Sprintf("; the gateway refused %s the spec does not allow (%s)", plural(d.UnexpectedCount(), "request"), d.Unexpected[0].Target)
		}
		return Headline{"ok", sentence + "."}
	}
	return Headline{"ok", fmt.Sprintf("All %d verdict checks passed.", n)}
}

func (t *Timeline) failure() (Headline, bool) {
	bad := func(format string, args ...any) (Headline, bool) {
		return Headline{"bad", fmt.Sprintf(format, args...)}, true
	}
	if t.Probe != nil {
		var v []Probe
		for _, g := range t.Probe.Groups {
			for _, p := range g.Probes {
				if p.Class() == ClassViolation {
					v = append(v, p)
				}
			}
		}
		if len(v) > 0 {
			more := ""
			if len(v) > 1 {
				more = fmt.Sprintf(" (and %d more)", len(v)-1)
			}
			return bad("%s: %s %s%s%s.", plural(len(v), "isolation violation"), v[0].ID, v[0].Title, reasonSuffix(v[0].Reason), more)
		}
	}
	for i := range t.Events {
		e := &t.Events[i]
		if e.Kind != KindModelRequest || e.OK {
			continue
		}
		for j := range t.Events {
			c := &t.Events[j]
			if c.Parent != e.Seq || c.Kind != KindEgress {
				continue
			}
			if c.Denied() {
				return bad("The model endpoint was unreachable: the gateway refused %s%s.", hostPort(c), reasonSuffix(c.Reason))
			}
			if c.Error != "" {
				return bad("The model endpoint was unreachable: the gateway let the request to %s out, but it failed upstream (%s).", hostPort(c), c.Error)
			}
		}
		return bad("The model request of turn %d failed: %s.", e.Turn, trimDot(orDash(e.Error)))
	}
	for _, c := range t.Containers {
		if c.ExitCode == nil || *c.ExitCode == 0 || c.Role == "gateway" || c.Role == "sidecar" {
			continue
		}
		switch {
		case c.OOMKilled:
			mem := ""
			if c.PeakMemoryBytes > 0 {
				mem = ", peak " + fmtBytes(c.PeakMemoryBytes)
			}
			return bad("The %s container ran out of memory and was killed (exit %d%s).", c.Role, *c.ExitCode, mem)
		case c.TimedOut:
			return bad("The %s container was stopped at the timeout (exit %d) before it finished.", c.Role, *c.ExitCode)
		}
	}
	for i := range t.Events {
		if e := &t.Events[i]; e.Kind == KindAgentError {
			return bad("The agent stopped with an error: %s.", trimDot(orDash(e.Error)))
		}
	}
	for _, p := range t.Phases {
		if !p.OK {
			return bad("The run failed in phase %q: %s.", p.Name, trimDot(orDash(p.Error)))
		}
	}
	for _, c := range t.Containers {
		if c.ExitCode != nil && *c.ExitCode != 0 {
			return bad("The %s container %s.", orDash(c.Role), exitText(*c.ExitCode))
		}
	}
	if t.Verdict != nil {
		for _, c := range t.Verdict.Checks {
			if !c.OK {
				return bad("The check %q failed%s.", c.Name, reasonSuffix(c.Detail))
			}
		}
	}
	return Headline{}, false
}

func reasonSuffix(s string) string {
	if s = trimDot(s); s != "" {
		return ": " + s
	}
	return ""
}

func trimDot(s string) string { return strings.TrimRight(strings.TrimSpace(s), ".") }

func hostPort(e *Event) string {
	if e.Port != "" {
		return e.Host + ":" + e.Port
	}
	return e.Host
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Question is what the run asked: the agent's question as the harness
// recorded it, or what doctor and test-sandbox set out to answer.
func (t *Timeline) QuestionText() (text string, recorded bool) {
	if t.Question != "" {
		return t.Question, true
	}
	switch t.Command {
	case "doctor":
		return "Does the sandbox work end to end, without a model or a key? (the built-in check lists the sidecar's tools, reads the answer format, and makes sure the gateway refuses a .invalid name and that there is no route out)", false
	case "test-sandbox":
		return "Do the sandbox's walls hold? (the probe suite tries every way out it knows from inside the agent's container)", false
	case "run":
		return "(the question is not recorded in run-metadata.json)", false
	}
	return "", false
}

// DenialGroup is the gateway's denials of one destination.
type DenialGroup struct {
	Target string // method host:port
	Count  int
	Reason string
	Why    string // why the denial was expected; empty when it was not
}

// DenialSummary sorts the gateway's denials into the ones the run caused on
// purpose and the others.
type DenialSummary struct {
	Expected, Unexpected []DenialGroup
}

// UnexpectedCount is the number of unexpected denials.
func (d DenialSummary) UnexpectedCount() int { return countOf(d.Unexpected) }

// ExpectedCount is the number of expected denials.
func (d DenialSummary) ExpectedCount() int { return countOf(d.Expected) }

func countOf(gs []DenialGroup) int {
	n := 0
	for _, g := range gs {
		n += g.Count
	}
	return n
}

// ExpectedDenial says whether the run asked for this denial itself, and
// why: doctor's own check sends a request for a name under .invalid (which
// can never exist) and requires the gateway to refuse it; test-sandbox's
// probes try the ways out on purpose, and a refusal is a wall holding
// (each probe's verdict says whether it held). In a run with the agent no
// denial is expected: the workload tried something the spec does not
// allow.
func (t *Timeline) ExpectedDenial(e *Event) (bool, string) {
	if !e.Denied() {
		return false, ""
	}
	host := strings.ToLower(strings.TrimSuffix(e.Host, "."))
	switch t.Command {
	case "doctor":
		if strings.HasSuffix(host, ".invalid") {
			return true, "doctor's own check: the gateway must refuse a name under .invalid"
		}
		if e.Credential == "refused" && e.ResolvedIP == "" {
			return true, "doctor's own check: the credential listener must refuse a model request without the run's placeholder"
		}
	case "test-sandbox":
		return true, "a probe trying a way out on purpose: the refusal is the wall holding"
	}
	return false, ""
}

// Denials groups the gateway's denials per destination, expected apart.
func (t *Timeline) Denials() DenialSummary {
	var d DenialSummary
	at := map[string]*DenialGroup{}
	var order []string
	for i := range t.Events {
		e := &t.Events[i]
		if !e.Denied() {
			continue
		}
		exp, why := t.ExpectedDenial(e)
		key := fmt.Sprintf("%v %s %s", exp, e.Method, hostPort(e))
		g, ok := at[key]
		if !ok {
			g = &DenialGroup{Target: strings.TrimSpace(e.Method + " " + hostPort(e)), Reason: e.Reason, Why: why}
			at[key] = g
			order = append(order, key)
		}
		g.Count++
	}
	for _, k := range order {
		if g := at[k]; g.Why != "" {
			d.Expected = append(d.Expected, *g)
		} else {
			d.Unexpected = append(d.Unexpected, *g)
		}
	}
	return d
}
