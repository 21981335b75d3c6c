package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/spf13/cobra"
)

func newGCCmd(s Streams) *cobra.Command {
	var asJSON, kept bool
	var runsDir string
	var b backendFlags
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove containers, networks and run namespaces left by runs whose process is gone",
		Long: `gc removes every container, then every network, labelled mcpsidecar=1 whose
owning process (labels mcpsidecar.pid and mcpsidecar.host) no longer runs on this
host. Resources of live runs, and of other hosts, are left alone, and so are
those of runs started with --keep (label mcpsidecar.kept=1) unless --kept is
given; "mcpsidecar runs rm RUN" removes one kept run. "mcpsidecar run" does a
gc without --kept first on its own. It also unmounts the noexec mounts of
output directories (below --runs-dir) that a run killed before its
teardown left behind; a live run's are left alone.

With --backend kubernetes it removes, by the same rules, the run namespaces
(labelled as the containers are) of the cluster --kubeconfig and --context
name, waiting until each is gone; it does not need Docker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			switch b.backend {
			case backendDocker:
				err = runGC(cmd.Context(), s, kept, asJSON)
			case backendKubernetes:
				err = runKubeGC(cmd.Context(), s, b, kept, asJSON)
			default:
				return usageErrorf("--backend %q: want %s or %s", b.backend, backendDocker, backendKubernetes)
			}
			return errors.Join(err, sweepMounts(s, runsDir, asJSON)) // after the containers that held them
		},
	}
	addGCBackendFlags(cmd, &b)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was removed as JSON")
	cmd.Flags().BoolVar(&kept, "kept", false, "also remove what runs started with --keep kept")
	cmd.Flags().StringVar(&runsDir, "runs-dir", runs.DefaultRunsDir, "directory that holds the run directories (for leftover output mounts)")
	return cmd
}

// connectEngine opens the Docker engine and checks that it answers; tests
// replace it with a fake.
var connectEngine = func(ctx context.Context) (dockerx.Engine, func(), error) {
	eng, err := dockerx.New()
	if err != nil {
		return nil, nil, withHint(ExitUnavailable, err, "set DOCKER_HOST or start the Docker daemon")
	}
	if _, err := eng.Version(ctx); err != nil {
		eng.Close()
		return nil, nil, withHint(ExitUnavailable, err, "is the Docker daemon running? (DOCKER_HOST)")
	}
	return eng, func() { eng.Close() }, nil
}

// hostSelection selects leftovers of this host's dead harness processes.
func hostSelection() orchestrate.Selection {
	host, _ := os.Hostname()
	return orchestrate.Selection{Host: host, Alive: orchestrate.PIDAlive}
}

func runGC(ctx context.Context, s Streams, kept, asJSON bool) error {
	eng, done, err := connectEngine(ctx)
	if err != nil {
		return err
	}
	defer done()
	sel := hostSelection()
	sel.Kept = kept
	got, err := orchestrate.Sweep(ctx, eng, sel)
	if asJSON {
		return errors.Join(writeJSONDoc(s.Out, gcSchema, got), err) // the document, and a failed removal still fails
	}
	printRemoved(s.Out, got)
	fmt.Fprintf(s.Out, "gc: removed %d container(s), %d network(s) and %d volume(s)\n", len(got.Containers), len(got.Networks), len(got.Volumes))
	if !kept {
		sayKept(ctx, s, eng, sel)
	}
	return err
}

// sayKept tells how many containers of runs kept with --keep gc left, and
// how to remove them.
func sayKept(ctx context.Context, s Streams, eng dockerx.Engine, sel orchestrate.Selection) {
	cs, err := eng.ListContainers(ctx, map[string]string{orchestrate.LabelKept: "1"})
	if err != nil {
		return
	}
	sel.Kept = true
	runsKept := map[string]bool{}
	for _, c := range cs {
		if c.Labels[orchestrate.LabelKept] == "1" && sel.Picks(c) {
			runsKept[c.Labels[orchestrate.LabelRun]] = true
		}
	}
	if len(runsKept) > 0 {
		fmt.Fprintf(s.Out, "gc: left %d run(s) kept with --keep; remove them with: mcpsidecar gc --kept (or one: mcpsidecar runs rm RUN)\n", len(runsKept))
	}
}

func printRemoved(w io.Writer, got orchestrate.Collected) {
	for _, c := range got.Containers {
		fmt.Fprintf(w, "removed container %s (run %s)\n", c.Name, c.Labels[orchestrate.LabelRun])
	}
	for _, n := range got.Networks {
		fmt.Fprintf(w, "removed network %s (run %s)\n", n.Name, n.Labels[orchestrate.LabelRun])
	}
	for _, v := range got.Volumes {
		fmt.Fprintf(w, "removed volume %s (run %s)\n", v.Name, v.Labels[orchestrate.LabelRun])
	}
}

// sweepMounts unmounts the output-directory mounts dead runs left below
// runsDir (internal/noexec); the JSON document stays the engine's.
func sweepMounts(s Streams, runsDir string, asJSON bool) error {
	removed, err := noexec.Sweep(runsDir)
	if !asJSON {
		for _, m := range removed {
			fmt.Fprintf(s.Out, "removed mount %s\n", m)
		}
	}
	if err != nil {
		return fmt.Errorf("removing leftover output mounts: %w", err)
	}
	return nil
}
