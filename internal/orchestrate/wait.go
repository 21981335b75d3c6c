package orchestrate

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Running is a started workload container whose output is streaming.
type Running struct {
	c    *Container
	done <-chan error
}

// StartWorkload creates the workload container, attaches its stdout and
// stderr to the writers (before start, so nothing is lost) and starts it.
func (s *Session) StartWorkload(ctx context.Context, role string, stdout, stderr io.Writer) (*Running, error) {
	st, ok := s.Step(role)
	if !ok {
		return nil, fmt.Errorf("running %s: not in the plan", role)
	}
	c, err := s.existing(ctx, st)
	if err != nil {
		return nil, err
	}
	done, err := s.Engine.AttachContainer(context.WithoutCancel(ctx), c.ID, stdout, stderr)
	if err != nil {
		return nil, err
	}
	if err := s.start(ctx, c); err != nil {
		return nil, err
	}
	if err := s.release(ctx, c); err != nil {
		return nil, err
	}
	if c.Pid == 0 {
		_, _ = s.inspect(ctx, c)
	}
	return &Running{c: c, done: done}, nil
}

// release prepares a held container and lets it go on.
func (s *Session) release(ctx context.Context, c *Container) error {
	if !c.Step.Hold {
		return nil
	}
	state, err := s.inspect(ctx, c)
	if err != nil {
		return err
	}
	if !state.Running || state.Pid == 0 {
		return fmt.Errorf("%s stopped before it was released (exit code %d)", c.Step.Role, state.ExitCode)
	}
	if s.Prepare != nil {
		if err := s.Prepare(ctx, c); err != nil {
			return err
		}
	}
	if s.Release == nil {
		return fmt.Errorf("releasing %s: no release function", c.Step.Role)
	}
	return s.Release(c.Step)
}

// Wait waits for the workload to exit. Past timeout it is killed and
// recorded as timed out; when ctx ends (a signal) it is killed too.
func (s *Session) Wait(ctx context.Context, w *Running, timeout time.Duration) (int, error) {
	return s.awaitExit(ctx, w.c, w.done, timeout, nil)
}

// awaitExit waits for c's exit as the engine reports it; gone, when not
// nil, is called once c's init has ended, as soon as the host sees it
// (WatchExit), which is before the engine's report.
func (s *Session) awaitExit(ctx context.Context, c *Container, done <-chan error, timeout time.Duration, gone func(context.Context)) (int, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var ended <-chan struct{}
	if gone != nil && c.Process != nil {
		stop := make(chan struct{})
		defer close(stop)
		ended = c.Process.WatchExit(stop)
	}
	var cause error
wait:
	for {
		select {
		case r := <-c.wait:
			<-drain(done)
			code := r.ExitCode
			c.ExitCode = &code
			return code, r.Err
		case <-ended:
			ended = nil
			gone(ctx)
		case <-timer.C:
			c.TimedOut = true
			cause = fmt.Errorf("%s still running after the %s timeout; killed", c.Step.Role, timeout)
			break wait
		case <-ctx.Done():
			cause = fmt.Errorf("%s interrupted: %w", c.Step.Role, ctx.Err())
			break wait
		}
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = s.Engine.KillContainer(kctx, c.ID, "KILL")
	select {
	case r := <-c.wait:
		code := r.ExitCode
		c.ExitCode = &code
	case <-kctx.Done():
	}
	<-drain(done)
	return -1, cause
}

// drain waits briefly for the output stream to finish after an exit, so
// the last lines are not lost, without hanging on a stuck stream.
func drain(done <-chan error) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
		close(out)
	}()
	return out
}

// Logs copies a service container's output.
func (s *Session) Logs(ctx context.Context, role string, stdout, stderr io.Writer) error {
	c := s.Find(role)
	if c == nil {
		return fmt.Errorf("reading %s logs: no such container", role)
	}
	return s.Engine.Logs(ctx, c.ID, stdout, stderr)
}
