package dockerbackend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// outputCapEvery is how often the harness measures the output directories.
const outputCapEvery = 500 * time.Millisecond

// outputCap stops a role whose output directory passes runs.MaxOutputBytes
// or runs.MaxOutputEntries while the run goes on. Threat: the output
// directory is a bind mount of the host's disk, and the fsize limit bounds
// one file, not how many; a workload could fill the host's disk or inodes.
// The cap is checked every half second, so a fast writer can pass it by
// what it writes in that time (bounded by fsize per file).
type outputCap struct {
	mu    sync.Mutex
	over  map[string]string // role -> what was found
	usage func(role string) (bytes int64, entries int, err error)
	kill  func(ctx context.Context, role string) error
	warn  func(format string, args ...any)
	stop  context.CancelFunc
	done  chan struct{}
}

// startOutputCap begins measuring every role's output directory.
func (b *backend) startOutputCap(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	oc := &outputCap{over: map[string]string{}, usage: b.r.RunDir().Usage, kill: b.r.Session().Kill, warn: b.r.Warn,
		stop: cancel, done: make(chan struct{})}
	b.outCap = oc
	var roles []string
	for _, st := range b.r.Session().Plan.Containers {
		roles = append(roles, st.Role)
	}
	go func() {
		defer close(oc.done)
		tick := time.NewTicker(outputCapEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, role := range roles {
				oc.check(ctx, role)
			}
		}
	}()
}

// check stops role when its output directory passes a cap, once.
func (oc *outputCap) check(ctx context.Context, role string) {
	oc.mu.Lock()
	_, already := oc.over[role]
	oc.mu.Unlock()
	if already {
		return
	}
	size, n, err := oc.usage(role)
	if err != nil || (size <= runs.MaxOutputBytes && n <= runs.MaxOutputEntries) {
		return
	}
	what := fmt.Sprintf("output directory passed its cap (%d bytes, %d entries; caps %d bytes, %d entries): the role was stopped",
		size, n, runs.MaxOutputBytes, runs.MaxOutputEntries)
	oc.mu.Lock()
	oc.over[role] = what
	oc.mu.Unlock()
	if err := oc.kill(ctx, role); err != nil {
		what += " (stopping it failed: " + err.Error() + ")"
	}
	oc.warn("%s %s", role, what)
}

// stopOutputCap ends the measuring and returns the roles that passed a cap.
func (b *backend) stopOutputCap() map[string]string {
	if b.outCap == nil {
		return nil
	}
	b.outCap.stop()
	<-b.outCap.done
	b.outCap.mu.Lock()
	defer b.outCap.mu.Unlock()
	return b.outCap.over
}
