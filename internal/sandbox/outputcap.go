package sandbox

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
	mu   sync.Mutex
	over map[string]string // role -> what was found
	kill func(ctx context.Context, role string) error
	stop context.CancelFunc
	done chan struct{}
}

// startOutputCap begins measuring every role's output directory.
func (j *job) startOutputCap(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	oc := &outputCap{over: map[string]string{}, kill: j.sess.Kill, stop: cancel, done: make(chan struct{})}
	j.outCap = oc
	var roles []string
	for _, st := range j.sess.Plan.Containers {
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
				j.checkOutputCap(ctx, oc, role)
			}
		}
	}()
}

func (j *job) checkOutputCap(ctx context.Context, oc *outputCap, role string) {
	oc.mu.Lock()
	_, already := oc.over[role]
	oc.mu.Unlock()
	if already {
		return
	}
	b, n, err := j.dir.Usage(role)
	if err != nil || (b <= runs.MaxOutputBytes && n <= runs.MaxOutputEntries) {
		return
	}
	what := fmt.Sprintf("output directory passed its cap (%d bytes, %d entries; caps %d bytes, %d entries): the role was stopped",
		b, n, runs.MaxOutputBytes, runs.MaxOutputEntries)
	oc.mu.Lock()
	oc.over[role] = what
	oc.mu.Unlock()
	if err := oc.kill(ctx, role); err != nil {
		what += " (stopping it failed: " + err.Error() + ")"
	}
	fmt.Fprintf(j.s.Err, "warning: %s %s\n", role, what)
}

// stopOutputCap ends the measuring and returns the roles that passed a cap.
func (j *job) stopOutputCap() map[string]string {
	if j.outCap == nil {
		return nil
	}
	j.outCap.stop()
	<-j.outCap.done
	j.outCap.mu.Lock()
	defer j.outCap.mu.Unlock()
	return j.outCap.over
}
