package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/spf13/cobra"
)

func newGCCmd(s Streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove containers and networks left by runs whose process is gone",
		Long: `gc removes every container, then every network, labelled mcpsidecar=1 whose
owning process (labels mcpsidecar.pid and mcpsidecar.host) no longer runs on this
host. Resources of live runs, and of other hosts, are left alone. "mcpsidecar run"
does this first on its own.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGC(cmd.Context(), s, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was removed as JSON")
	return cmd
}

func runGC(ctx context.Context, s Streams, asJSON bool) error {
	eng, err := dockerx.New()
	if err != nil {
		return withHint(ExitUnavailable, err, "set DOCKER_HOST or start the Docker daemon")
	}
	defer eng.Close()
	if _, err := eng.Version(ctx); err != nil {
		return withHint(ExitUnavailable, err, "is the Docker daemon running? (DOCKER_HOST)")
	}
	host, _ := os.Hostname()
	got, err := orchestrate.GC(ctx, eng, host, pidAlive)
	if asJSON {
		b, _ := json.MarshalIndent(got, "", "  ")
		fmt.Fprintln(s.Out, string(b))
	} else {
		for _, c := range got.Containers {
			fmt.Fprintf(s.Out, "removed container %s (run %s)\n", c.Name, c.Labels[orchestrate.LabelRun])
		}
		for _, n := range got.Networks {
			fmt.Fprintf(s.Out, "removed network %s (run %s)\n", n.Name, n.Labels[orchestrate.LabelRun])
		}
		fmt.Fprintf(s.Out, "gc: removed %d container(s) and %d network(s)\n", len(got.Containers), len(got.Networks))
	}
	return err
}
