package kubebackend

import (
	"context"
	"os"

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
