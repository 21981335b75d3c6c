package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/spf13/cobra"
)

func newRunsRmCmd(s Streams, dir *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm RUN...",
		Short: "Remove runs: their containers and networks (kept ones included) and their directories",
		Long: `rm removes, for each RUN (an id, a unique prefix of one, or a run directory),
the containers and networks it left on this host (those of a --keep run too),
then its run directory. A run whose harness process still runs is refused.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runsRm(cmd.Context(), s, *dir, args, asJSON)
		},
		ValidArgsFunction: completeRunIDs(dir, 1<<10),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was removed as JSON")
	return cmd
}

// removedRun is one run `runs rm` removed.
type removedRun struct {
	Run        string   `json:"run"`
	Path       string   `json:"path"`
	Containers []string `json:"containers"`
	Networks   []string `json:"networks"`
}

func runsRm(ctx context.Context, s Streams, dir string, refs []string, asJSON bool) error {
	var paths []string
	for _, ref := range refs {
		p, err := resolveRun(dir, ref)
		if err != nil {
			return err
		}
		paths = append(paths, p)
	}
	eng, done, err := connectEngine(ctx)
	if err != nil {
		return err
	}
	defer done()
	out := struct {
		Removed []removedRun `json:"removed"`
	}{Removed: []removedRun{}}
	var errs []error
	for _, p := range paths {
		r, err := removeRun(ctx, eng, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.Removed = append(out.Removed, r)
		if !asJSON {
			fmt.Fprintf(s.Out, "removed %s: %d container(s), %d network(s), directory %s\n", r.Run, len(r.Containers), len(r.Networks), r.Path)
		}
	}
	if asJSON {
		if err := writeJSONDoc(s.Out, runsRmSchema, out); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// removeRun removes the resources of the run at path, then the directory.
func removeRun(ctx context.Context, eng dockerx.Engine, path string) (removedRun, error) {
	id := filepath.Base(path)
	r := removedRun{Run: id, Path: path, Containers: []string{}, Networks: []string{}}
	sel := hostSelection()
	sel.Run = id
	cs, err := eng.ListContainers(ctx, map[string]string{orchestrate.LabelRun: id})
	if err != nil {
		return r, fmt.Errorf("listing the containers of %s: %w", id, err)
	}
	if pid := orchestrate.LiveOwner(cs, sel.Host, id, sel.Alive); pid != 0 {
		return r, fmt.Errorf("run %s is still going (harness pid %d); stop it first", id, pid)
	}
	got, err := orchestrate.Sweep(ctx, eng, sel)
	for _, c := range got.Containers {
		r.Containers = append(r.Containers, c.Name)
	}
	for _, n := range got.Networks {
		r.Networks = append(r.Networks, n.Name)
	}
	if err != nil {
		return r, fmt.Errorf("removing the resources of %s: %w", id, err)
	}
	return r, runs.Remove(path)
}

func newRunsPruneCmd(s Streams, dir *string) *cobra.Command {
	var olderThan time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete run directories older than --older-than (all by default)",
		Long: `prune deletes the run directories in --runs-dir that finished more than
--older-than ago (default 0: all). It leaves alone a run started with --keep
(its containers may still exist: "runs rm RUN" removes both) and a directory
without run-metadata.json changed within the last hour (the run may still be
going). It touches no container or network: "gc" does that.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if olderThan < 0 {
				return usageErrorf("--older-than %s: want a duration of 0 or more", olderThan)
			}
			return runsPrune(s, *dir, olderThan, asJSON, time.Now())
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "delete only runs that finished longer ago than this (e.g. 168h)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was deleted and skipped as JSON")
	return cmd
}

// pruned is the JSON document of `runs prune`.
type pruned struct {
	Deleted []string          `json:"deleted"`
	Skipped map[string]string `json:"skipped"`
}

func runsPrune(s Streams, dir string, olderThan time.Duration, asJSON bool, now time.Time) error {
	all, err := runs.List(dir)
	if err != nil {
		return err
	}
	prune, skipped := runs.Prunable(all, now, olderThan)
	out := pruned{Deleted: []string{}, Skipped: skipped}
	var errs []error
	for _, r := range prune {
		if err := runs.Remove(r.Path); err != nil {
			errs = append(errs, err)
			continue
		}
		out.Deleted = append(out.Deleted, r.ID)
	}
	if asJSON {
		if err := writeJSONDoc(s.Out, runsPruneSchema, out); err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	for _, id := range out.Deleted {
		fmt.Fprintf(s.Out, "deleted %s\n", filepath.Join(dir, id))
	}
	for _, id := range slices.Sorted(maps.Keys(skipped)) {
		fmt.Fprintf(s.Out, "skipped %s: %s\n", id, skipped[id])
	}
	fmt.Fprintf(s.Out, "prune: deleted %d run(s), skipped %d\n", len(out.Deleted), len(skipped))
	return errors.Join(errs...)
}
