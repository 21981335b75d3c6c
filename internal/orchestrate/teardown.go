package orchestrate

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// Teardown removes every container the session created, then every
// network. The containers are removed together, then the networks together
// (each removal is an engine round trip that would otherwise add up); no
// network is removed before every container removal has returned. It keeps
// going past errors and returns them joined, in reverse order of creation
// (containers first).
func (s *Session) Teardown(ctx context.Context) error {
	s.CloseProcesses()
	errs := removeAll(len(s.Containers), func(i int) error { return s.Engine.RemoveContainer(ctx, s.Containers[i].ID) })
	errs = append(errs, removeAll(len(s.Networks), func(i int) error { return s.Engine.RemoveNetwork(ctx, s.Networks[i].ID) })...)
	return errors.Join(errs...)
}

// CloseProcesses releases every container's proven process
// (Container.Process); nothing uses them after. Teardown calls it; a
// caller that keeps the containers calls it itself.
func (s *Session) CloseProcesses() {
	for _, c := range s.Containers {
		if c.Process != nil {
			c.Process.Close()
			c.Process = nil
		}
	}
}

// removeAll runs remove for every index at once and returns the errors in
// reverse index order.
func removeAll(n int, remove func(i int) error) []error {
	got := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = remove(i)
		}()
	}
	wg.Wait()
	var errs []error
	for i := n - 1; i >= 0; i-- {
		if got[i] != nil {
			errs = append(errs, got[i])
		}
	}
	return errs
}

// RemoveCommand is the docker command that removes what --keep kept.
func (s *Session) RemoveCommand() []string {
	cmd := []string{"sh", "-c"}
	var parts []string
	if len(s.Containers) > 0 {
		rm := []string{"docker", "rm", "--force"}
		for _, c := range s.Containers {
			rm = append(rm, c.Step.Spec.Name)
		}
		parts = append(parts, strings.Join(rm, " "))
	}
	if len(s.Networks) > 0 {
		rm := []string{"docker", "network", "rm"}
		for _, n := range s.Networks {
			rm = append(rm, n.Name)
		}
		parts = append(parts, strings.Join(rm, " "))
	}
	return append(cmd, strings.Join(parts, " && "))
}
