package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// reportFile is the probe report's name in a test-sandbox run directory.
const reportFile = runs.FileProbeReport

func newReportCmd(s Streams) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Read probe reports: show one, or compare two over time",
		Long: `A report is named by a report.json path, a run directory, or a run id (or a
unique prefix of one) in --runs-dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("report: name a subcommand: show or diff")
		},
	}
	cmd.PersistentFlags().StringVar(&dir, "runs-dir", runs.DefaultRunsDir, "directory that holds the run directories")
	cmd.AddCommand(newReportShowCmd(s, &dir), newReportDiffCmd(s, &dir))
	return cmd
}

func newReportShowCmd(s Streams, dir *string) *cobra.Command {
	var markdown, asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN|FILE",
		Short: "Print a probe report as a table (or Markdown), with the number of probes per verdict; exit 4 on a violation",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := loadReportArg(*dir, args[0])
			if err != nil {
				return err
			}
			switch {
			case asJSON:
				err = writeJSONDoc(s.Out, reportSchema, newReportDoc(args[0], r))
			case markdown:
				err = r.WriteMarkdown(s.Out)
			default:
				err = r.WriteTable(s.Out)
			}
			if err != nil {
				return err
			}
			if n := r.Violations(); n > 0 {
				return withCode(ExitViolation, fmt.Errorf("%d probe(s) in %s found an isolation violation", n, args[0]))
			}
			return nil
		},
		ValidArgsFunction: completeRunIDs(dir, 1),
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "write Markdown instead of a table")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON with the count of probes per verdict")
	return cmd
}

// reportDoc is `report show --json`.
type reportDoc struct {
	Source string                `json:"source"`
	Probes int                   `json:"probes"`
	Counts map[probe.Verdict]int `json:"counts"`
	Groups []probe.Group         `json:"groups"`
}

func newReportDoc(source string, r *probe.Report) reportDoc {
	d := reportDoc{Source: source, Probes: r.Probes(), Counts: map[probe.Verdict]int{}, Groups: r.Groups}
	for _, v := range []probe.Verdict{probe.Pass, probe.Violation, probe.Unsupported} {
		d.Counts[v] = 0
	}
	maps.Copy(d.Counts, r.Counts())
	if d.Groups == nil {
		d.Groups = []probe.Group{}
	}
	return d
}

// diffDoc is `report diff --json`.
type diffDoc struct {
	Old     string       `json:"old"`
	New     string       `json:"new"`
	Worse   int          `json:"worse"`
	Changes []diffChange `json:"changes"`
}

// diffChange is one probe whose result changed; Old or New is "absent"
// when the probe is missing from that report.
type diffChange struct {
	Group string `json:"group"`
	ID    string `json:"id"`
	Title string `json:"title"`
	Old   string `json:"old_verdict"`
	New   string `json:"new_verdict"`
	Worse bool   `json:"worse"`
}

func newDiffDoc(oldName, newName string, changes []probe.Change) diffDoc {
	d := diffDoc{Old: oldName, New: newName, Changes: []diffChange{}}
	verdict := func(c *probe.Capability) string {
		if c == nil {
			return "absent"
		}
		return string(c.Verdict)
	}
	for _, c := range changes {
		if c.Worse {
			d.Worse++
		}
		d.Changes = append(d.Changes, diffChange{Group: c.Group, ID: c.ID, Title: c.Title, Old: verdict(c.Old), New: verdict(c.New), Worse: c.Worse})
	}
	return d
}

func newReportDiffCmd(s Streams, dir *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "List, probe by probe, what changed between two reports; exit 4 when a probe got worse",
		Long: `diff compares two probe reports (ours or the seed's; each a report.json path, a
run directory or a run id) probe by probe and prints every probe whose verdict
or outcomes changed. A line marked "!" got worse: its verdict went from pass
towards violation (for reports without verdicts: its tool path became
Allowed). Exit code 4 when any probe got worse.`,
		Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			old, err := loadReportArg(*dir, args[0])
			if err != nil {
				return err
			}
			cur, err := loadReportArg(*dir, args[1])
			if err != nil {
				return err
			}
			changes := probe.Diff(old, cur)
			var worse int
			if asJSON {
				doc := newDiffDoc(args[0], args[1], changes)
				worse, err = doc.Worse, writeJSONDoc(s.Out, reportDiffSchema, doc)
			} else {
				worse, err = probe.WriteDiff(s.Out, changes)
			}
			if err != nil {
				return err
			}
			if worse > 0 {
				return withCode(ExitViolation, fmt.Errorf("%d probe(s) got worse from %s to %s", worse, args[0], args[1]))
			}
			return nil
		},
		ValidArgsFunction: completeRunIDs(dir, 2),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the changes as JSON")
	return cmd
}

// loadReportArg loads the report ref names (see reportPath); a missing or
// malformed report is a usage error.
func loadReportArg(runsDir, ref string) (*probe.Report, error) {
	path, err := reportPath(runsDir, ref)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	r, err := probe.LoadReport(path)
	if err != nil {
		return nil, withCode(ExitUsage, reportError(path, err))
	}
	return r, nil
}

// reportPath turns a report file, a run directory or a run id into the
// report file's path.
func reportPath(runsDir, ref string) (string, error) {
	fi, err := os.Stat(ref)
	switch {
	case err == nil && fi.Mode().IsRegular():
		return ref, nil
	case err == nil && fi.IsDir():
		return runReport(ref)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading %s: %w", ref, err)
	case err != nil && filepath.Base(ref) != ref:
		return "", fmt.Errorf("%s does not exist", ref)
	case err == nil:
		return "", fmt.Errorf("%s is not a report file", ref)
	}
	dir, err := runs.Resolve(runsDir, ref)
	if err != nil {
		return "", fmt.Errorf("%s is neither a report file nor a run: %w", ref, err)
	}
	return runReport(dir)
}

// runReport is the report of the run directory dir.
func runReport(dir string) (string, error) {
	path := filepath.Join(dir, reportFile)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("run %s has no %s (only test-sandbox runs have one)", filepath.Base(dir), reportFile)
	}
	return path, nil
}

// reportError says what is wrong with a report in the user's terms, not
// the decoder's (no Go type names).
func reportError(path string, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("%s is not a probe report: not JSON (at byte %d)", path, syn.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("%s is not a probe report: want a JSON array of probe groups as test-sandbox writes, found a JSON %s", path, typ.Value)
	}
	return err
}
