package probe

import (
	"fmt"
	"io"
)

// Change is one probe that differs between two reports.
type Change struct {
	Group, ID, Title string
	// Old and New are nil when the probe is absent from that report.
	Old, New *Capability
	// Worse is true when the verdict got worse (pass -> unsupported ->
	// violation), or, for reports without verdicts (the seed's), when the
	// tool path went from Denied or N/A to Allowed.
	Worse bool
}

// Diff lists, probe by probe, what changed from old to new: any of the
// verdict or the shell, tool and alternate outcomes. Probes only in one
// report are listed too.
func Diff(old, new *Report) []Change {
	var out []Change
	for _, g := range new.Groups {
		for i := range g.Capabilities {
			n := &g.Capabilities[i]
			o := old.Find(g.ID, n.ID)
			if o == nil || differs(o, n) {
				out = append(out, Change{Group: g.ID, ID: n.ID, Title: n.Title, Old: o, New: n, Worse: worse(o, n)})
			}
		}
	}
	for _, g := range old.Groups {
		for i := range g.Capabilities {
			o := &g.Capabilities[i]
			if new.Find(g.ID, o.ID) == nil {
				out = append(out, Change{Group: g.ID, ID: o.ID, Title: o.Title, Old: o})
			}
		}
	}
	return out
}

func differs(o, n *Capability) bool {
	return o.Verdict != n.Verdict || o.Tool.Outcome != n.Tool.Outcome ||
		o.Shell.Outcome != n.Shell.Outcome || o.Alternates.Outcome != n.Alternates.Outcome
}

func worse(o, n *Capability) bool {
	if o == nil {
		return n.Verdict == Violation
	}
	if o.Verdict != "" || n.Verdict != "" {
		return n.Verdict.rank() > o.Verdict.rank()
	}
	return n.Tool.Outcome == Allowed && o.Tool.Outcome != Allowed
}

// WriteDiff writes the changes, one line each, and returns how many got
// worse.
func WriteDiff(w io.Writer, changes []Change) (int, error) {
	worse := 0
	for _, c := range changes {
		mark := " "
		if c.Worse {
			mark = "!"
			worse++
		}
		if _, err := fmt.Fprintf(w, "%s %s/%s %s: %s -> %s\n", mark, c.Group, c.ID, c.Title, describe(c.Old), describe(c.New)); err != nil {
			return worse, fmt.Errorf("writing diff: %w", err)
		}
	}
	_, err := fmt.Fprintf(w, "%d probe(s) changed, %d got worse\n", len(changes), worse)
	return worse, err
}

func describe(c *Capability) string {
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s (tool %s, shell %s, alternates %s)", orDash(string(c.Verdict)), c.Tool.Outcome, c.Shell.Outcome, c.Alternates.Outcome)
}
