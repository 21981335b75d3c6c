package timeline

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// readMetadata reads run-metadata.json and adds the harness's events: the
// run's start and end, each phase, and each container's start and exit.
func (b *builder) readMetadata() {
	var m runMetadata
	if !b.r.readJSON(FileRunMetadata, true, &m) {
		b.count(FileRunMetadata, 0)
		return
	}
	t := b.t
	if m.RunID != "" {
		t.RunID = m.RunID
	}
	t.Command, t.Started, t.Finished = m.Command, m.Started, m.Finished
	t.Image, t.Engine, t.Networks, t.Containers, t.Phases = m.Image, m.Engine, m.Networks, m.Containers, m.Phases
	t.Verdict, t.Degradations, t.ExitCode = m.Verdict, m.Degradations, m.ExitCode
	t.Credentials = m.Credentials
	before := len(t.Events)
	if !m.Started.IsZero() {
		b.add(Event{Time: m.Started, Source: SourceHarness, Kind: KindRunStart, OK: true,
			Summary: fmt.Sprintf("%s started (%s)", orDash(m.Command), t.RunID), File: FileRunMetadata})
	}
	for _, p := range m.Phases {
		b.add(Event{Time: p.Start, DurationMS: p.DurationMS, Source: SourceHarness, Kind: KindPhase,
			OK: p.OK, Name: p.Name, Error: p.Error, Summary: phaseSummary(p), File: FileRunMetadata})
	}
	for _, c := range m.Containers {
		b.containerEvents(c, m)
	}
	if !m.Finished.IsZero() {
		b.add(runEnd(m))
	}
	b.count(FileRunMetadata, len(t.Events)-before)
}

// CredentialInfo is one credential of a run (run-metadata.json
// "credentials"): the host variable it came from, the host it is sent to,
// and where it lived. Names only; a value is never recorded.
type CredentialInfo struct {
	Variable string `json:"variable"`
	Host     string `json:"host"`
	Lives    string `json:"lives"` // CredentialInGateway or CredentialInSandbox
}

// Where a credential lived, in [CredentialInfo.Lives].
const (
	CredentialInGateway = "gateway"
	CredentialInSandbox = "sandbox"
)

// Where says where the credential lived, in words.
func (c CredentialInfo) Where() string {
	switch c.Lives {
	case CredentialInGateway:
		return "held by the gateway only (the agent had a per-run placeholder)"
	case CredentialInSandbox:
		return "in the sandbox: the agent had the real value (a recorded softening)"
	}
	return "unknown (" + c.Lives + ")"
}

func phaseSummary(p PhaseInfo) string {
	if p.OK {
		return "phase " + p.Name
	}
	return fmt.Sprintf("phase %s failed: %s", p.Name, orDash(p.Error))
}

func runEnd(m runMetadata) Event {
	e := Event{Time: m.Finished, Source: SourceHarness, Kind: KindRunEnd, ExitCode: m.ExitCode,
		OK: m.Verdict == nil || m.Verdict.OK, File: FileRunMetadata}
	verdict := "no verdict"
	if m.Verdict != nil {
		verdict = map[bool]string{true: "verdict ok", false: "verdict FAILED"}[m.Verdict.OK]
	}
	e.Summary = fmt.Sprintf("%s finished: %s", orDash(m.Command), verdict)
	if m.ExitCode != nil {
		e.Summary += fmt.Sprintf(", exit code %d", *m.ExitCode)
		e.OK = e.OK && *m.ExitCode == 0
	}
	return e
}

func (b *builder) containerEvents(c ContainerInfo, m runMetadata) {
	name := c.Role
	if c.Name != "" {
		name = fmt.Sprintf("%s (%s)", c.Role, c.Name)
	}
	started := c.Started
	if started.IsZero() {
		started, _ = roleStart(m, c.Role)
	}
	if !started.IsZero() {
		b.add(Event{Time: started, Source: SourceHarness, Kind: KindContainerStart, OK: true, Role: c.Role,
			Name: c.Name, Summary: "container " + name + " started", File: FileRunMetadata})
	}
	if c.ExitCode == nil {
		return
	}
	at := c.Finished
	if at.IsZero() {
		at = roleEnd(m, c.Role)
	}
	b.add(Event{Time: at, Source: SourceHarness, Kind: KindContainerExit, OK: *c.ExitCode == 0, Role: c.Role,
		Name: c.Name, ExitCode: c.ExitCode, Summary: "container " + name + " " + exitText(*c.ExitCode) + killNote(c),
		File: FileRunMetadata})
}

// roleEnd places a container's exit when the harness did not record its
// time: the workload (any role but gateway and sidecar) at the end of the
// phase that waited for it, the others at the start of teardown, else at
// the end of the run.
func roleEnd(m runMetadata, role string) time.Time {
	if role != "gateway" && role != "sidecar" {
		if p, ok := findPhase(m.Phases, func(name string) bool {
			return name == "wait" || strings.HasPrefix(name, "wait ") || name == "run "+role
		}); ok {
			return p.Start.Add(msDuration(p.DurationMS))
		}
	}
	if p, ok := findPhase(m.Phases, func(name string) bool { return strings.Contains(name, "teardown") }); ok {
		return p.Start
	}
	return m.Finished
}

// roleStart places a container's start when the harness did not record
// it: at the end of the phase that started it ("agent" or "start agent").
func roleStart(m runMetadata, role string) (time.Time, bool) {
	p, ok := findPhase(m.Phases, func(name string) bool { return name == role || name == "start "+role })
	if !ok || !p.OK {
		return time.Time{}, false
	}
	return p.Start.Add(msDuration(p.DurationMS)), true
}

func findPhase(phases []PhaseInfo, match func(lowerName string) bool) (PhaseInfo, bool) {
	for _, p := range phases {
		if match(strings.ToLower(p.Name)) {
			return p, true
		}
	}
	return PhaseInfo{}, false
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// exitText explains an exit code; codes above 128 are a signal's.
func exitText(code int) string {
	switch code {
	case 0:
		return "exited 0"
	case 137:
		return "was killed (exit 137: SIGKILL, e.g. out of memory or timeout)"
	case 139:
		return "crashed (exit 139: SIGSEGV)"
	case 143:
		return "was terminated (exit 143: SIGTERM)"
	}
	if code > 128 && code < 160 {
		return fmt.Sprintf("died of signal %d (exit %d)", code-128, code)
	}
	return fmt.Sprintf("exited %d", code)
}

// readExtras reads the sources that are not events: the gateway policy,
// the probe report and the answer.
func (b *builder) readExtras() {
	b.t.Policy = b.readPolicy()
	b.t.Probe = b.readProbe()
	b.readOutputs()
	b.listArtifacts()
	if data := b.r.read(FileAnswer, false); data != nil {
		b.t.Answer = truncateUTF8(string(data), maxAnswerBytes)
	}
}

// truncateUTF8 cuts s to at most n bytes on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "\n[… truncated]"
}

// killNote adds what the harness knows about why a container was killed.
func killNote(c ContainerInfo) string {
	switch {
	case c.OOMKilled:
		return " [out of memory]"
	case c.TimedOut:
		return " [timed out]"
	}
	return ""
}

// readPolicy returns what the gateway was told to allow: gateway-policy.json
// when the run directory has it, else the "gateway" section of
// resolved-profile.json (the same netpolicy.Config), else nil.
func (b *builder) readPolicy() *Policy {
	var p Policy
	if b.r.readJSON(FileGatewayPol, false, &p) {
		return &p
	}
	var prof struct {
		Gateway *Policy `json:"gateway"`
	}
	if b.r.readJSON(FileResolvedProfile, false, &prof) {
		return prof.Gateway
	}
	return nil
}
