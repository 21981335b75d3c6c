package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
)

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

// namespaceGC is what gc needs of a cluster.
type namespaceGC interface {
	Leftovers(ctx context.Context) ([]kube.Leftover, error)
	Remove(ctx context.Context, ls []kube.Leftover) ([]kube.Leftover, error)
}

// connectKubeGC connects to the cluster b names; tests replace it with a
// fake.
var connectKubeGC = func(b backendFlags) (namespaceGC, error) {
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

// kubeGCDoc is gc's --json document on the Kubernetes backend: the
// Docker document's arrays, empty (nothing of Docker is looked at), and
// the namespaces removed.
type kubeGCDoc struct {
	Containers []dockerx.Resource `json:"containers"`
	Networks   []dockerx.Resource `json:"networks"`
	Namespaces []namespaceDoc     `json:"namespaces"`
}

// namespaceDoc is one removed namespace, shaped as a Docker resource
// (the id is the namespace's uid) plus whether the cluster was already
// deleting it.
type namespaceDoc struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Terminating bool              `json:"terminating"`
}

// runKubeGC removes the run namespaces of this host's dead runs (and,
// with kept, of its kept ones) and waits until they are gone.
func runKubeGC(ctx context.Context, s Streams, b backendFlags, kept, asJSON bool) error {
	c, err := connectKubeGC(b)
	if err != nil {
		return err
	}
	ls, err := c.Leftovers(ctx)
	if err != nil {
		return withHint(ExitUnavailable, err, "is the cluster up, and may this account list namespaces? (--kubeconfig, --context, KUBECONFIG)")
	}
	sel := hostSelection()
	sel.Kept = kept
	chosen, keptRuns := kube.Choose(ls, sel)
	gone, err := c.Remove(ctx, chosen)
	if err != nil {
		err = withHint(ExitRuntime, fmt.Errorf("removing run namespaces: %w", err),
			"run gc again; `kubectl get namespaces -l mcpsidecar=1` shows what is left (gc needs the right to delete namespaces)")
	}
	if asJSON {
		return errors.Join(writeJSONDoc(s.Out, gcSchema, newKubeGCDoc(gone)), err)
	}
	printRemovedNamespaces(s.Out, gone)
	fmt.Fprintf(s.Out, "gc: removed %d namespace(s)\n", len(gone))
	if keptRuns > 0 {
		fmt.Fprintf(s.Out, "gc: left %d run(s) kept with --keep; remove them with: mcpsidecar gc --backend %s --kept\n", keptRuns, backendKubernetes)
	}
	return err
}

func newKubeGCDoc(gone []kube.Leftover) kubeGCDoc {
	d := kubeGCDoc{Containers: []dockerx.Resource{}, Networks: []dockerx.Resource{}, Namespaces: []namespaceDoc{}}
	for _, l := range gone {
		d.Namespaces = append(d.Namespaces, namespaceDoc{ID: l.UID, Name: l.Name, Labels: l.Labels, Terminating: l.Terminating})
	}
	return d
}

func printRemovedNamespaces(w io.Writer, gone []kube.Leftover) {
	for _, l := range gone {
		how := ""
		if l.Terminating {
			how = "; it was already being deleted"
		}
		fmt.Fprintf(w, "removed namespace %s (run %s%s)\n", l.Name, l.RunID(), how)
	}
}
