package orchestrate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/hold"
)

// create creates the step's container (created is its record, even when
// the error is not nil) and registers the wait before start.
func (s *Session) create(ctx context.Context, st Step) (*Container, error) {
	c, err := s.newContainer(ctx, st)
	if c != nil {
		s.Containers = append(s.Containers, c)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// newContainer creates the step's container and registers the wait before
// start. The container it returns is to be recorded even with an error
// (connecting a second network failed), so teardown removes it.
func (s *Session) newContainer(ctx context.Context, st Step) (*Container, error) {
	st, err := s.withHosts(st)
	if err != nil {
		return nil, err
	}
	return s.createPrepared(ctx, st)
}

// withHosts returns st with its host entries added to its spec.
func (s *Session) withHosts(st Step) (Step, error) {
	hosts, err := s.hostEntries(st)
	if err != nil {
		return st, err
	}
	st.Spec.ExtraHosts = append(slices.Clone(st.Spec.ExtraHosts), hosts...)
	return st, nil
}

// createPrepared is newContainer for a step whose host entries are in its
// spec already; it reads nothing of the session, so it may run beside
// other work.
func (s *Session) createPrepared(ctx context.Context, st Step) (*Container, error) {
	id, err := s.Engine.CreateContainer(ctx, st.Spec)
	if id == "" {
		return nil, err
	}
	c := &Container{Step: st, ID: id}
	if err == nil {
		c.wait = s.Engine.WaitContainer(context.WithoutCancel(ctx), id)
	}
	return c, err
}

// createAhead creates in the background, each as soon as the engine
// takes it, every container after role's in the plan not created yet
// whose host entries are known, while role's phase creates and starts
// its own. A held service among them (not the workload) is started as
// soon as it is created: it waits for its release, which comes in its own
// phase, so its start (the slowest engine call here) overlaps role's
// start and readiness; this stops at the first later step that is not
// such a service, or when the services before it could take longer to
// become ready than its hold lasts (hold.Timeout). join waits for all of
// it and records what was created in the plan's order (a half-created
// container too, so teardown removes it). A failure is left to the
// container's own phase: one that was not created is created there (and
// fails there), a half-created one fails there with its error.
func (s *Session) createAhead(ctx context.Context, role string, readyTimeout time.Duration) (join func()) {
	var todo []Step
	var early []bool
	seen, ahead, before := false, true, 0
	for _, st := range s.Plan.Containers {
		if !seen {
			seen = st.Role == role
			before++
			continue
		}
		if s.Find(st.Role) != nil {
			continue
		}
		st, err := s.withHosts(st)
		if err != nil {
			continue // created in its own phase, once its peers run
		}
		ahead = ahead && !st.Workload && st.Hold && time.Duration(before)*readyTimeout <= hold.Timeout/2
		before++
		todo, early = append(todo, st), append(early, ahead)
	}
	made := make([]*Container, len(todo))
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, st := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.createPrepared(ctx, st)
			if err == nil && early[i] {
				c.StartedAhead, c.startAsked = true, true
				c.peak = s.Engine.PeakMemory(context.WithoutCancel(ctx), c.ID)
				c.startErr = s.Engine.StartContainer(ctx, c.ID)
			}
			made[i], errs[i] = c, err
		}()
	}
	return func() {
		wg.Wait()
		for i, c := range made {
			if c != nil {
				c.createErr = errs[i]
				s.Containers = append(s.Containers, c)
			}
		}
	}
}

// start starts c, or returns how its start made ahead went.
func (s *Session) start(ctx context.Context, c *Container) error {
	if c.StartedAhead {
		return c.startErr
	}
	c.peak = s.Engine.PeakMemory(context.WithoutCancel(ctx), c.ID)
	c.startAsked = true
	return s.Engine.StartContainer(ctx, c.ID)
}

// existing returns role's container, creating it when it was not created
// ahead.
func (s *Session) existing(ctx context.Context, st Step) (*Container, error) {
	if c := s.Find(st.Role); c != nil {
		if c.createErr != nil {
			return nil, c.createErr
		}
		return c, nil
	}
	return s.create(ctx, st)
}

// StartService creates and starts a long-running role and waits until its
// readiness check answers 200, the container exits, or readyTimeout passes.
func (s *Session) StartService(ctx context.Context, role string, readyTimeout time.Duration) error {
	st, ok := s.Step(role)
	if !ok {
		return fmt.Errorf("starting %s: not in the plan", role)
	}
	c, err := s.existing(ctx, st)
	if err != nil {
		return err
	}
	if err := s.start(ctx, c); err != nil {
		return err
	}
	if err := s.release(ctx, c); err != nil {
		return err
	}
	if st.Ready == nil {
		return nil
	}
	return s.awaitReady(ctx, c, readyTimeout)
}
