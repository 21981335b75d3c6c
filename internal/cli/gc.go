package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerbackend"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	kubebackend "github.com/mcpsidecar/mcpsidecar/internal/kube/backend"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
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
			if b.backend != backendDocker && b.backend != backendKubernetes {
				return usageErrorf("--backend %q: want %s or %s", b.backend, backendDocker, backendKubernetes)
			}
			gc, done, err := b.gc(cmd.Context())
			if err == nil {
				defer done()
				err = runGC(cmd.Context(), s, gc, kept, asJSON)
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

// addGCBackendFlags adds the backend flags gc reads: which backend, and
// which cluster. The others of backendFlags say how a run is started and
// mean nothing to gc, which finds run namespaces by their labels.
func addGCBackendFlags(cmd *cobra.Command, b *backendFlags) {
	f := cmd.Flags()
	f.StringVar(&b.backend, "backend", orDefault(os.Getenv(envBackend), backendDocker),
		"what to clean up: docker (containers and networks), or kubernetes (run namespaces; docs/kubernetes.md) ("+envBackend+")")
	f.StringVar(&b.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then ~/.kube/config, then the in-cluster account)")
	f.StringVar(&b.context, "context", "", "kubeconfig context (default its current one)")
}

// gc is the gc of the backend --backend names (docker or kubernetes),
// connected: the engine, or the cluster --kubeconfig and --context name;
// done closes it.
func (b backendFlags) gc(ctx context.Context) (gc sandbox.GC, done func(), err error) {
	if b.backend == backendKubernetes {
		c, err := connectKubeGC(b)
		if err != nil {
			return nil, nil, err
		}
		return kubebackend.NewGC(c), func() {}, nil
	}
	eng, done, err := connectEngine(ctx)
	if err != nil {
		return nil, nil, err
	}
	return dockerbackend.NewGC(eng), done, nil
}

// connectKubeGC connects to the cluster b names; tests replace it with a
// fake.
var connectKubeGC = func(b backendFlags) (kubebackend.Namespaces, error) {
	cfg, err := kube.Config(b.kubeconfigPath(), b.context)
	if err != nil {
		return nil, withHint(ExitUnavailable, err, "name the cluster with --kubeconfig (or KUBECONFIG) and --context")
	}
	c, err := kube.NewClient(cfg)
	if err != nil {
		return nil, withHint(ExitUnavailable, err, "check the kubeconfig's server and credentials")
	}
	return c, nil
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

// runGC removes what gc picks of this host's runs (kept ones too with
// kept) and prints it, or writes its --json document.
func runGC(ctx context.Context, s Streams, gc sandbox.GC, kept, asJSON bool) error {
	sel := hostSelection()
	sel.Kept = kept
	got, err := gc.Collect(ctx, sel)
	if got.Doc == nil {
		return err // nothing was looked at
	}
	if asJSON {
		return errors.Join(writeJSONDoc(s.Out, gcSchema, got.Doc), err) // the document, and a failed removal still fails
	}
	for _, line := range got.Removed {
		fmt.Fprintln(s.Out, line)
	}
	fmt.Fprintln(s.Out, got.Summary)
	if got.Kept != nil {
		if note := got.Kept(ctx); note != "" {
			fmt.Fprintln(s.Out, note)
		}
	}
	return err
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
