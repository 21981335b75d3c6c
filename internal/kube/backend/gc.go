package kubebackend

import (
	"context"
	"fmt"
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// gc starts deleting the run namespaces this host's dead runs left
// (the selection `mcpsidecar gc` applies; kept runs stay), before this
// run adds its own, as a Docker run removes dead runs' containers. It does
// not wait: the namespace controller finishes the deletions while the run
// goes on, and `mcpsidecar gc --backend kubernetes` waits for them.
func (b *kubeBackend) gc(ctx context.Context, r *sandbox.Job) {
	if b.k.Client == nil {
		return
	}
	ls, err := b.k.Client.Leftovers(ctx)
	if err != nil {
		r.Warn("gc: %v", err)
		return
	}
	host, _ := os.Hostname()
	chosen, _ := kube.Choose(ls, orchestrate.Selection{Host: host, Alive: orchestrate.PIDAlive})
	started, err := b.k.Client.StartRemove(ctx, chosen)
	if len(started) > 0 && !r.Options().Quiet {
		r.Say("gc: deleting %d namespace(s) left by dead runs", len(started))
	}
	if err != nil {
		r.Warn("gc: %v", err)
	}
}

// Namespaces is what gc needs of a cluster: its run namespaces
// (kube.Client; a fake in cli's tests).
type Namespaces interface {
	Leftovers(ctx context.Context) ([]kube.Leftover, error)
	Remove(ctx context.Context, ls []kube.Leftover) ([]kube.Leftover, error)
}

// NewGC is gc on the cluster c: the run namespaces (labelled as Docker's
// containers are) the selection picks, waiting until each is gone. It
// does not need Docker.
func NewGC(c Namespaces) sandbox.GC { return namespaceGC{c: c} }

type namespaceGC struct{ c Namespaces }

func (g namespaceGC) Collect(ctx context.Context, sel orchestrate.Selection) (sandbox.Collected, error) {
	ls, err := g.c.Leftovers(ctx)
	if err != nil {
		return sandbox.Collected{}, exitcode.WithHint(exitcode.Unavailable, err, "is the cluster up, and may this account list namespaces? (--kubeconfig, --context, KUBECONFIG)")
	}
	chosen, keptRuns := kube.Choose(ls, sel)
	gone, err := g.c.Remove(ctx, chosen)
	if err != nil {
		err = exitcode.WithHint(exitcode.Runtime, fmt.Errorf("removing run namespaces: %w", err),
			"run gc again; `kubectl get namespaces -l mcpsidecar=1` shows what is left (gc needs the right to delete namespaces)")
	}
	c := sandbox.Collected{Doc: newGCDoc(gone), Summary: fmt.Sprintf("gc: removed %d namespace(s)", len(gone))}
	for _, l := range gone {
		how := ""
		if l.Terminating {
			how = "; it was already being deleted"
		}
		c.Removed = append(c.Removed, fmt.Sprintf("removed namespace %s (run %s%s)", l.Name, l.RunID(), how))
	}
	if keptRuns > 0 {
		note := fmt.Sprintf("gc: left %d run(s) kept with --keep; remove them with: mcpsidecar gc --backend kubernetes --kept", keptRuns)
		c.Kept = func(context.Context) string { return note }
	}
	return c, err
}

// gcDoc is gc's --json document on the Kubernetes backend: the Docker
// document's arrays, empty (nothing of Docker is looked at), and the
// namespaces removed.
type gcDoc struct {
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

func newGCDoc(gone []kube.Leftover) gcDoc {
	d := gcDoc{Containers: []dockerx.Resource{}, Networks: []dockerx.Resource{}, Namespaces: []namespaceDoc{}}
	for _, l := range gone {
		d.Namespaces = append(d.Namespaces, namespaceDoc{ID: l.UID, Name: l.Name, Labels: l.Labels, Terminating: l.Terminating})
	}
	return d
}
