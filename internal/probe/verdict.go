package probe

import "fmt"

// Goal is what a hardened sandbox should yield for a probe, from the goal
// column of the seed's catalogue (catalogue.go).
type Goal int

// Goals.
const (
	// GoalDeny (D): Denied, or N/A because the surface is absent; Allowed
	// on any path is a violation.
	GoalDeny Goal = iota
	// GoalAny (A): benign introspection; any measured outcome passes.
	GoalAny
	// GoalAllow (W): required by the workload or allowlisted by the spec;
	// the tool path must yield Allowed.
	GoalAllow
	// GoalContext (C): needs a target the context does not configure; the
	// probe reports N/A and the verdict is unsupported.
	GoalContext
	// GoalNone: the surface does not exist on Linux (Windows-only probes).
	GoalNone
)

// Expected is the human form of a goal, as written in the report.
func (g Goal) Expected() string {
	switch g {
	case GoalDeny:
		return "Denied"
	case GoalAllow:
		return "Allowed"
	case GoalAny:
		return "Allowed or Denied"
	default:
		return "N/A"
	}
}

// Judge sets c's expected outcome and verdict for goal g. The tool path (the
// in-process attempt) is the primary one; an Allowed shell path or alternate
// is also a violation of a deny goal, because a bypass is a bypass.
func Judge(g Goal, c *Capability) {
	c.Expected = g.Expected()
	c.Verdict, c.VerdictReason = judge(g, c)
}

func judge(g Goal, c *Capability) (Verdict, string) {
	switch g {
	case GoalDeny:
		return judgeDeny(c)
	case GoalAllow:
		return judgeAllow(c)
	case GoalAny:
		if c.Tool.Outcome == Error {
			return Unsupported, "the tool path could not measure: " + c.Tool.Summary
		}
		return Pass, "any outcome is acceptable for benign introspection"
	case GoalContext:
		if c.Tool.Outcome == Allowed || c.Tool.Outcome == Denied {
			return Pass, "measured against a configured target"
		}
		return Unsupported, "no target is configured for this probe"
	default:
		return Unsupported, "the surface does not exist on Linux"
	}
}

func judgeDeny(c *Capability) (Verdict, string) {
	switch {
	case c.Tool.Outcome == Allowed:
		return Violation, "tool path Allowed: " + c.Tool.Summary
	case c.Shell.Outcome == Allowed:
		return Violation, "shell path Allowed: " + c.Shell.Summary
	case c.Alternates.Outcome == Allowed:
		return Violation, "alternate Allowed: " + c.Alternates.Summary
	case c.Tool.Outcome == Error:
		return Unsupported, "the tool path could not measure: " + c.Tool.Summary
	}
	return Pass, fmt.Sprintf("tool path %s", c.Tool.Outcome)
}

func judgeAllow(c *Capability) (Verdict, string) {
	switch c.Tool.Outcome {
	case Allowed:
		return Pass, "Allowed as the spec requires"
	case Denied:
		return Violation, "the spec requires this, but the tool path was Denied: " + c.Tool.Summary
	}
	return Unsupported, fmt.Sprintf("tool path %s: %s", c.Tool.Outcome, c.Tool.Summary)
}

// rank orders verdicts from best to worst, for report diff.
func (v Verdict) rank() int {
	switch v {
	case Pass:
		return 0
	case Unsupported, "":
		return 1
	default:
		return 2
	}
}
