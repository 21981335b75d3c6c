package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/probe"
)

func newReportCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Read probe reports: show one, or compare two over time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("report: name a subcommand: show or diff")
		},
	}
	cmd.AddCommand(newReportShowCmd(s), newReportDiffCmd(s))
	return cmd
}

func newReportShowCmd(s Streams) *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:   "show REPORT",
		Short: "Print a report.json as a table (or Markdown), with the number of probes per verdict",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := loadReportArg(args[0])
			if err != nil {
				return err
			}
			if markdown {
				return r.WriteMarkdown(s.Out)
			}
			return r.WriteTable(s.Out)
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "write Markdown instead of a table")
	return cmd
}

func newReportDiffCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "List, probe by probe, what changed between two reports; exit 4 when a probe got worse",
		Long: `diff compares two report.json files (ours or the seed's) probe by probe and
prints every probe whose verdict or outcomes changed. A line marked "!" got
worse: its verdict went from pass towards violation (for reports without
verdicts: its tool path became Allowed). Exit code 4 when any probe got worse.`,
		Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			old, err := loadReportArg(args[0])
			if err != nil {
				return err
			}
			cur, err := loadReportArg(args[1])
			if err != nil {
				return err
			}
			worse, err := probe.WriteDiff(s.Out, probe.Diff(old, cur))
			if err != nil {
				return err
			}
			if worse > 0 {
				return withCode(ExitViolation, fmt.Errorf("%d probe(s) got worse from %s to %s", worse, args[0], args[1]))
			}
			return nil
		},
	}
}

// loadReportArg loads a report named on the command line; a missing or
// malformed file is a usage error.
func loadReportArg(path string) (*probe.Report, error) {
	r, err := probe.LoadReport(path)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return r, nil
}
