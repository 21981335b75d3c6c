package orchestrate

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"
)

// Kill stops role's container at once (SIGKILL); its exit is recorded by
// whoever waits for it.
func (s *Session) Kill(ctx context.Context, role string) error {
	c := s.Find(role)
	if c == nil {
		return fmt.Errorf("stopping %s: no such container", role)
	}
	return s.Engine.KillContainer(ctx, c.ID, "KILL")
}

// stopAhead sends SIGTERM to every service container that runs, each in
// the background; Stop then waits for their exits.
func (s *Session) stopAhead(ctx context.Context) {
	for _, c := range s.Containers {
		if c.Step.Workload || c.ExitCode != nil || c.wait == nil || !c.startAsked || c.signalled != nil || len(c.Step.StopAfter) > 0 {
			continue // one that waits for others is signalled by Stop, once they have exited
		}
		sent := make(chan error, 1)
		c.signalled = sent
		go func() { sent <- s.Engine.KillContainer(context.WithoutCancel(ctx), c.ID, "TERM") }()
	}
}

// Stop kills the service containers (not yet removed) and records their
// exit codes, so metadata can say how each ended. A container never
// started (created up front for a phase the run did not reach) is left as
// it is.
func (s *Session) Stop(ctx context.Context) {
	// The containers are stopped together: each one's graceful exit
	// (closing its listeners, flushing its log) would otherwise add up;
	// only one whose step says to stop after others (Step.StopAfter)
	// waits for their stop to end first.
	var wg sync.WaitGroup
	stopped := map[string]chan struct{}{}
	for _, c := range s.Containers {
		stopped[c.Step.Role] = make(chan struct{})
	}
	for _, c := range s.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(stopped[c.Step.Role])
			for _, role := range c.Step.StopAfter {
				if ch, ok := stopped[role]; ok && role != c.Step.Role {
					<-ch
				}
			}
			if c.ExitCode != nil || c.wait == nil || !c.startAsked {
				return
			}
			s.stop(ctx, c)
		}()
	}
	wg.Wait()
}

func (s *Session) stop(ctx context.Context, c *Container) {
	// The signal first: the engine refuses it for a container that is not
	// running, and only then is it worth a look (one round trip saved on
	// the usual path, a running server). It may have been sent already,
	// at the workload's end (stopAhead).
	var err error
	if c.signalled != nil {
		err = <-c.signalled
		c.signalled = nil
	} else {
		err = s.Engine.KillContainer(ctx, c.ID, "TERM")
	}
	if err != nil {
		if st, err := s.Engine.InspectContainer(ctx, c.ID); err != nil || !st.Running {
			return // never started, or already gone: nothing to wait for
		}
	}
	select {
	case r := <-c.wait:
		code := r.ExitCode
		c.ExitCode = &code
		return
	case <-time.After(cmp.Or(s.StopGrace, StopGrace)):
	}
	c.KilledAtStop = true
	_ = s.Engine.KillContainer(ctx, c.ID, "KILL")
	select {
	case r := <-c.wait:
		code := r.ExitCode
		c.ExitCode = &code
	case <-time.After(2 * time.Second):
	}
}

// StopGrace is how long [Session.Stop] waits for a service to exit after
// SIGTERM before it kills it. The roles' own shutdown waits
// (egress.DefaultShutdownWait, sidecar.DefaultShutdownWait) are kept well
// below it, so a role stopped with a request in flight cancels it and
// records it as interrupted before the kill could cut its record short
// (a contract test keeps them in step).
const StopGrace = 5 * time.Second
