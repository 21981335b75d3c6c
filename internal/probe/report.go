package probe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Outcome is what one invocation path yielded, with the seed's words.
type Outcome string

// The seed's outcome words.
const (
	Allowed Outcome = "Allowed"
	Denied  Outcome = "Denied"
	Error   Outcome = "Error"
	NA      Outcome = "N/A"
)

// Verdict judges a probe against what the spec declares.
type Verdict string

// Verdicts. Unsupported means the probe could not measure the claim; it is
// never counted as a pass.
const (
	Pass        Verdict = "pass"
	Violation   Verdict = "violation"
	Unsupported Verdict = "unsupported"
)

// removed replaces every evidence value unless evidence serialisation was
// asked for (seed 10.3).
const removed = "[REMOVED]"

// Result is the outcome of one invocation path (shell or tool).
type Result struct {
	Outcome  Outcome `json:"outcome"`
	Summary  string  `json:"summary"`
	Evidence string  `json:"evidence"`
}

// Attempt is one alternate (bypass) attempt.
type Attempt struct {
	ID            string  `json:"id"`
	Title         string  `json:"title"`
	Outcome       Outcome `json:"outcome"`
	BypassClass   string  `json:"bypass_class"`
	CommandFamily string  `json:"command_family"`
	Evidence      string  `json:"evidence"`
}

// Alternates aggregates the alternate attempts of one probe.
type Alternates struct {
	Outcome  Outcome   `json:"outcome"`
	Summary  string    `json:"summary"`
	Attempts []Attempt `json:"attempts"`
}

// Capability is one probe's result: the seed's fields, then ours.
type Capability struct {
	ID         string     `json:"id"`
	Title      string     `json:"title"`
	Shell      Result     `json:"shell"`
	Tool       Result     `json:"tool"`
	Alternates Alternates `json:"alternates"`

	// Threat is what the probe answers; Expected what the sandbox should
	// yield on the tool path ("Denied", "Allowed", "Allowed or Denied",
	// "N/A"); Verdict the judgement and VerdictReason why.
	Threat        string  `json:"threat,omitempty"`
	Expected      string  `json:"expected,omitempty"`
	Verdict       Verdict `json:"verdict,omitempty"`
	VerdictReason string  `json:"verdict_reason,omitempty"`
}

// Group is one probe group (G01...).
type Group struct {
	ID           string       `json:"id"`
	Title        string       `json:"title"`
	Capabilities []Capability `json:"capabilities"`
}

// Report is the content of report.json. It serialises as the seed's bare
// array of groups, so a report can be compared with one from the seed.
type Report struct {
	Groups []Group
}

// MarshalJSON writes the seed's array shape.
func (r *Report) MarshalJSON() ([]byte, error) {
	if r.Groups == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(r.Groups)
}

// UnmarshalJSON reads the seed's array shape.
func (r *Report) UnmarshalJSON(data []byte) error {
	return json.Unmarshal(data, &r.Groups)
}

// LoadReport reads a report.json written by this suite or by the seed.
func LoadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading report: %w", err)
	}
	r := &Report{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("decoding report %s: %w", path, err)
	}
	for gi, g := range r.Groups {
		if g.ID == "" {
			return nil, fmt.Errorf("decoding report %s: group %d has no id", path, gi)
		}
		for ci, c := range g.Capabilities {
			if c.ID == "" {
				return nil, fmt.Errorf("decoding report %s: group %s capability %d has no id", path, g.ID, ci)
			}
		}
	}
	return r, nil
}

// Counts returns how many probes got each verdict ("" for a seed report).
func (r *Report) Counts() map[Verdict]int {
	n := map[Verdict]int{}
	for _, g := range r.Groups {
		for _, c := range g.Capabilities {
			n[c.Verdict]++
		}
	}
	return n
}

// Violations returns how many probes have the verdict violation.
func (r *Report) Violations() int { return r.Counts()[Violation] }

// Probes returns the number of probes in the report.
func (r *Report) Probes() int {
	n := 0
	for _, g := range r.Groups {
		n += len(g.Capabilities)
	}
	return n
}

// Find returns the probe with the given group and probe id, or nil.
func (r *Report) Find(group, id string) *Capability {
	for gi := range r.Groups {
		if r.Groups[gi].ID != group {
			continue
		}
		for ci := range r.Groups[gi].Capabilities {
			if r.Groups[gi].Capabilities[ci].ID == id {
				return &r.Groups[gi].Capabilities[ci]
			}
		}
	}
	return nil
}

// withoutEvidence returns a deep copy with every evidence value replaced by
// "[REMOVED]" (the seed's default at serialisation).
func (r *Report) withoutEvidence() *Report {
	out := &Report{Groups: make([]Group, len(r.Groups))}
	for gi, g := range r.Groups {
		g.Capabilities = append([]Capability(nil), g.Capabilities...)
		for ci := range g.Capabilities {
			c := &g.Capabilities[ci]
			c.Shell.Evidence = removed
			c.Tool.Evidence = removed
			c.Alternates.Attempts = append(make([]Attempt, 0, len(c.Alternates.Attempts)), c.Alternates.Attempts...)
			for ai := range c.Alternates.Attempts {
				c.Alternates.Attempts[ai].Evidence = removed
			}
		}
		out.Groups[gi] = g
	}
	return out
}

// Encode returns the report.json bytes (indent 2, as the seed), with
// evidence removed unless serializeEvidence.
func (r *Report) Encode(serializeEvidence bool) ([]byte, error) {
	if !serializeEvidence {
		r = r.withoutEvidence()
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding report: %w", err)
	}
	return append(data, '\n'), nil
}

// writeAtomic writes data to dir/name through a temporary file and a rename,
// so a reader never sees a half-written file.
func writeAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("renaming %s: %w", name, err)
	}
	return nil
}
