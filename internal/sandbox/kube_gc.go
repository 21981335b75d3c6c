package sandbox

import (
	"context"
	"fmt"
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// gc starts deleting the run namespaces this host's dead runs left
// (the selection `mcpsidecar gc` applies; kept runs stay), before this
// run adds its own, as a Docker run removes dead runs' containers. It does
// not wait: the namespace controller finishes the deletions while the run
// goes on, and `mcpsidecar gc --backend kubernetes` waits for them.
func (b *kubeBackend) gc(ctx context.Context, j *job) {
	if b.k.Client == nil {
		return
	}
	ls, err := b.k.Client.Leftovers(ctx)
	if err != nil {
		fmt.Fprintf(j.s.Err, "warning: gc: %v\n", err)
		return
	}
	host, _ := os.Hostname()
	chosen, _ := kube.Choose(ls, orchestrate.Selection{Host: host, Alive: orchestrate.PIDAlive})
	started, err := b.k.Client.StartRemove(ctx, chosen)
	if len(started) > 0 && !j.o.Quiet {
		fmt.Fprintf(j.s.Err, "gc: deleting %d namespace(s) left by dead runs\n", len(started))
	}
	if err != nil {
		fmt.Fprintf(j.s.Err, "warning: gc: %v\n", err)
	}
}
