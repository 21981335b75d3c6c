package probe

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the report as a readable table: one row per probe with
// its tool, shell and alternate outcomes, expectation and verdict, then the
// number of probes per verdict.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tID\tTOOL\tSHELL\tALTERNATES\tEXPECTED\tVERDICT\tTITLE")
	for _, g := range r.Groups {
		for _, c := range g.Capabilities {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, c.ID, c.Tool.Outcome, c.Shell.Outcome,
				c.Alternates.Outcome, orDash(c.Expected), orDash(string(c.Verdict)), c.Title)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// Summary is one line: the number of probes per verdict.
func (r *Report) Summary() string {
	n := r.Counts()
	return fmt.Sprintf("%d probes: %d pass, %d violation, %d unsupported", r.Probes(), n[Pass], n[Violation], n[Unsupported])
}

// WriteMarkdown writes the report as Markdown: the seed's "# Sandbox
// Report" with one table per group, plus our expectation and verdict, and
// a list of violations with their reasons first.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Sandbox Report\n\n" + r.Summary() + "\n")
	if v := r.violations(); len(v) > 0 {
		b.WriteString("\n## Violations\n\n")
		for _, line := range v {
			b.WriteString("- " + line + "\n")
		}
	}
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "\n## %s. %s\n\n| Shell | Tool | Alternate Shell | ID | Title | Expected | Verdict |\n| --- | --- | --- | --- | --- | --- | --- |\n", g.ID, g.Title)
		for _, c := range g.Capabilities {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Shell.Outcome, c.Tool.Outcome, c.Alternates.Outcome,
				c.ID, mdEscape(c.Title), orDash(c.Expected), orDash(string(c.Verdict)))
		}
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("writing markdown: %w", err)
	}
	return nil
}

func (r *Report) violations() []string {
	var out []string
	for _, g := range r.Groups {
		for _, c := range g.Capabilities {
			if c.Verdict == Violation {
				out = append(out, fmt.Sprintf("%s/%s %s: %s", g.ID, c.ID, mdEscape(c.Title), mdEscape(c.VerdictReason)))
			}
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
