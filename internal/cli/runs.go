package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
	"github.com/spf13/cobra"
)

func newRunsCmd(s Streams) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List past runs, show one, remove or prune them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.PersistentFlags().StringVar(&dir, "runs-dir", runs.DefaultRunsDir, "directory that holds the run directories")
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first, with command, verdict and exit code",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runsList(s, dir, asJSON)
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	show := &cobra.Command{
		Use:   "show [RUN]",
		Short: "Show one run (the latest by default): summary, verdict, phase timings, the joined timeline and artifact paths",
		Long:  "show takes a run id (run-...), a unique prefix of one, or a run directory path; without RUN, the latest run.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			return runsShow(s, dir, ref, asJSON)
		},
		ValidArgsFunction: completeRunIDs(&dir, 1),
	}
	show.Flags().BoolVar(&asJSON, "json", false, `print {"run": the run as runs list --json shows it, "timeline": the joined events, probe results and problems}`)
	cmd.AddCommand(list, show, newRunsRmCmd(s, &dir), newRunsPruneCmd(s, &dir), newRunsExportCmd(s, &dir), newRunsTailCmd(s, &dir))
	return cmd
}

func runsList(s Streams, dir string, asJSON bool) error {
	all, err := runs.List(dir)
	if err != nil {
		return err
	}
	if asJSON {
		doc := struct {
			Runs []runDoc `json:"runs"`
		}{Runs: []runDoc{}}
		for _, r := range all {
			doc.Runs = append(doc.Runs, newRunDoc(r))
		}
		return writeJSONDoc(s.Out, runsListSchema, doc)
	}
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tCOMMAND\tVERDICT\tEXIT\tDURATION")
	for _, r := range all {
		if r.Meta == nil {
			fmt.Fprintf(tw, "%s\t?\tno metadata\t?\t?\n", r.ID)
			continue
		}
		m := r.Meta
		kept := ""
		if m.Kept {
			kept = "\tkept (runs rm " + r.ID + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s%s\n", r.ID, m.Command, verdictWord(m.Verdict), m.ExitCode, m.Finished.Sub(m.Started).Round(1e6), kept)
	}
	return tw.Flush()
}

func verdictWord(v runs.Verdict) string {
	if v.OK {
		return "ok"
	}
	return "failed"
}

// resolveRun finds the run ref names, or the latest run when ref is
// empty; a run that cannot be found is a usage error.
func resolveRun(dir, ref string) (string, error) {
	var path string
	var err error
	if ref == "" {
		path, err = runs.Latest(dir)
	} else {
		path, err = runs.Resolve(dir, ref)
	}
	if err != nil {
		return "", withCode(ExitUsage, err)
	}
	return path, nil
}

// completeRunIDs completes up to max positional arguments with the run
// ids in *dir (read when completing, after flags are parsed).
func completeRunIDs(dir *string, max int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return runs.IDs(*dir), cobra.ShellCompDirectiveNoFileComp
	}
}

func runsShow(s Streams, dir, ref string, asJSON bool) error {
	path, err := resolveRun(dir, ref)
	if err != nil {
		return err
	}
	m, merr := runs.ReadMetadata(path)
	if merr != nil && !asJSON {
		return merr
	}
	// The joined timeline (internal/timeline): with --json the whole joined
	// data, whose top-level fields are run-metadata.json's; otherwise the
	// events, with each call's egress indented, after the tables below.
	tl, err := timeline.Build(path)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSONDoc(s.Out, runsShowSchema, struct {
			Run      runDoc             `json:"run"`
			Timeline *timeline.Timeline `json:"timeline"`
		}{newRunDoc(runs.Summary{ID: filepath.Base(path), Path: path, Meta: m, MetaErr: merr}), tl})
	}
	fmt.Fprintf(s.Out, "run %s (%s), exit code %d\n", m.RunID, m.Command, m.ExitCode)
	fmt.Fprintf(s.Out, "started %s, took %s\n", m.Started.Format("2006-01-02 15:04:05Z"), m.Finished.Sub(m.Started).Round(1e6))
	fmt.Fprintf(s.Out, "image %s (%s)\n", m.Image.Tag, m.Image.Method)
	for _, d := range m.Degradations {
		fmt.Fprintf(s.Out, "degraded: %s\n", termtext.Line(d))
	}
	fmt.Fprintf(s.Out, "\nverdict: %s\n", verdictWord(m.Verdict))
	for _, c := range m.Verdict.Checks {
		mark := "FAIL"
		if c.OK {
			mark = "ok"
		}
		// A check's detail can quote what the workload wrote (its harden
		// report, its audit): kept on its row (termtext.Line).
		fmt.Fprintf(s.Out, "  %-4s %s  %s\n", mark, termtext.Line(c.Name), termtext.Line(c.Detail))
	}
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPHASE\tMS\tOK")
	for _, p := range m.Phases {
		fmt.Fprintf(tw, "%s\t%.1f\t%v\n", p.Name, p.DurationMS, p.OK)
	}
	fmt.Fprintln(tw, "\nCONTAINER\tROLE\tEXIT\tPEAK MEM")
	for _, c := range m.Containers {
		code := "-"
		if c.ExitCode != nil {
			code = fmt.Sprint(*c.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f MB\n", c.Name, c.Role, code, float64(c.PeakMemoryBytes)/1e6)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := tl.Render(s.Out, timeline.RenderOptions{TimelineOnly: true, Color: colorTerminal(s.Out)}); err != nil {
		return err
	}
	return listArtifacts(s, path)
}

// colorTerminal reports whether w is a terminal that takes ANSI colours
// (colourConsole: on Windows, a console whose virtual terminal mode can
// be turned on) and NO_COLOR is unset, so denials can be highlighted in
// colour.
func colorTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && colourConsole(f)
}

func listArtifacts(s Streams, path string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("listing %s: %w", path, err)
	}
	names := []string{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	fmt.Fprintln(s.Out, "\nartifacts:")
	for _, n := range names {
		fmt.Fprintf(s.Out, "  %s\n", filepath.Join(path, n))
	}
	return nil
}
