package orchestrate

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/plan"
)

// Session carries out one [Plan] and remembers everything it created, so
// [Session.Teardown] can undo exactly that on every path.
type Session struct {
	Engine dockerx.Engine
	Plan   Plan
	// HostPrefixes lists the ranges the host uses outside Docker, which no
	// network may take (default HostPrefixes).
	HostPrefixes func() ([]netip.Prefix, error)
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL
	// (0: the package's StopGrace). Tests shorten it.
	StopGrace time.Duration

	Networks   []CreatedNetwork
	Containers []*Container
	// Workload is the started workload once Apply has started it.
	Workload *Running

	// Prepare and Release serve held steps (Step.Hold): once the
	// container runs, Prepare gets it, with its init proven to be on this
	// host (Container.Process) or why not (Container.ProcessErr), to
	// adjust its network namespace; then Release lets the role proceed.
	Prepare func(ctx context.Context, c *Container) error
	// AwaitReady, when set, judges a service's readiness instead of the
	// host's own check from inside its network namespace: the
	// engine-only way (a helper container in the service's network
	// namespace). It returns nil once the service answered.
	AwaitReady func(ctx context.Context, c *Container, timeout time.Duration) error
	Release    func(st Step) error
}

// CreatedNetwork is a network the session created.
type CreatedNetwork struct {
	Name     string
	ID       string
	Internal bool
	Subnet   string // empty when the engine chose it
}

// Container is a container the session created and what became of it.
type Container struct {
	Step     Step
	ID       string
	ExitCode *int
	TimedOut bool
	IPs      map[string]string
	// Pid is the container's init as the engine reported it once it ran
	// (0 before), in the engine's pid namespace: used on this host only
	// through Process.
	Pid int
	// Process is the container's init proven to be on this host and held
	// (dockerx.Engine.Process), once it ran; nil when it could not be,
	// and ProcessErr says why (it wraps dockerx.ErrNotOnThisHost or
	// dockerx.ErrProcessGone). Nothing on this host touches a process
	// the engine named without it.
	Process    dockerx.Process
	ProcessErr error
	// ReadyBy says how readiness was judged when not by a request
	// (ReadyByListening, ReadyByEngine); empty otherwise.
	ReadyBy string
	// StartedAhead: the container was started (held) while an earlier
	// service was becoming ready; see [Session.Apply].
	StartedAhead bool
	// KilledAtStop: [Session.Stop] killed it after [StopGrace]; its last
	// records may be missing.
	KilledAtStop bool
	peak         func() uint64
	wait         <-chan dockerx.WaitResult
	// startErr is how a start made ahead went.
	startErr error
	// inspected: Pid and IPs are from an inspect of the running container.
	inspected bool
	// startAsked: the engine was asked to start the container.
	startAsked bool
	// signalled yields the answer to the SIGTERM stopAhead sent.
	signalled chan error
	// createErr is why a container created ahead was not fully created
	// (its second network): its own phase fails with it.
	createErr error
}

// PeakMemory is the highest memory use seen while the container ran.
func (c *Container) PeakMemory() uint64 {
	if c.peak == nil {
		return 0
	}
	return c.peak()
}

// NewSession prepares to apply plan through engine.
func NewSession(engine dockerx.Engine, plan Plan) *Session {
	return &Session{Engine: engine, Plan: plan}
}

// Hooks are what the caller does around the phases of [Session.Apply].
// Every field is optional.
type Hooks struct {
	// Phase runs one phase (the caller times and reports it); nil runs it
	// as it is.
	Phase func(name string, run func() error) error
	// Done is called inside each phase once its work has ended, with its
	// error, and returns the phase's error: the caller records what the
	// phase left (start results, addresses) and words the error.
	Done func(ctx context.Context, phase string, err error) error
	// Stdout and Stderr receive the workload's output (nil: discarded).
	Stdout, Stderr io.Writer
	// ReadyTimeout bounds each service's readiness; Timeout the
	// workload's run (past it, the workload is killed).
	ReadyTimeout, Timeout time.Duration
	// StopAtExit: the caller stops the services once the workload has
	// ended (Session.Stop), so they are signalled as soon as the
	// workload's init is gone, while the engine is still noticing its
	// exit; Stop then waits for them. Unset (--keep): they stay up.
	StopAtExit bool
}

// PhaseNetworks and PhaseWait are the phases of [Session.Apply] that are
// not named by a step's role (plan.Plan.Phases).
const (
	PhaseNetworks = plan.PhaseNetworks
	PhaseWait     = plan.PhaseWait
)

// Apply carries out the plan in the plan's order: it creates the
// networks, then, step by step, starts each service and waits until it is
// ready, starts the workload with its output streaming to the hooks, and
// waits for its exit. It stops at the first failure, or when ctx ends
// (then returning ctx's error).
//
// What does not depend on that order is done earlier, together: while the
// first service is created, started and becoming ready, its phase creates
// every other container whose peers' addresses are known (all of them
// when the internal network has a subnet: each container has a fixed
// address there, see [Session.CreateNetworks]), and starts each later
// service that is held (Step.Hold) as soon as it is created. The order that matters is kept: a held service
// does nothing before its release, and it is released in its own phase,
// once every service before it is ready; the workload is started only
// after every service is ready, never ahead.
//
// Everything Apply created, even half-created (a container whose second
// network failed to connect), is registered in the session at once, so
// [Session.Teardown] removes exactly that, in reverse order, on every
// path. Unlike docker/mcp-gateway's proxies, which remove what they made
// as soon as a step fails, Apply leaves the removal to the caller: the
// run's record is read from the stopped containers and networks first
// (logs, the bridges' addresses), and --keep keeps them on purpose.
func (s *Session) Apply(ctx context.Context, h Hooks) error {
	type phase struct {
		name string
		run  func() error
	}
	phases := []phase{{PhaseNetworks, func() error { return s.CreateNetworks(ctx) }}}
	first := true
	for i, st := range s.Plan.Containers {
		if !st.Workload {
			ahead := first
			first = false
			phases = append(phases, phase{st.Role, func() error {
				if !ahead {
					return s.StartService(ctx, st.Role, h.ReadyTimeout)
				}
				join := s.createAhead(ctx, st.Role, h.ReadyTimeout)
				err := s.StartService(ctx, st.Role, h.ReadyTimeout)
				join()
				return err
			}})
			continue
		}
		if i != len(s.Plan.Containers)-1 {
			return fmt.Errorf("applying the plan: the workload %s is not the last step", st.Role)
		}
		phases = append(phases,
			phase{st.Role, func() error {
				w, err := s.StartWorkload(ctx, st.Role, orDiscard(h.Stdout), orDiscard(h.Stderr))
				s.Workload = w
				return err
			}},
			phase{PhaseWait, func() error {
				var err error
				if h.StopAtExit {
					_, err = s.awaitExit(ctx, s.Workload.c, s.Workload.done, h.Timeout, s.stopAhead)
				} else {
					_, err = s.Wait(ctx, s.Workload, h.Timeout)
				}
				return err
			}})
	}
	for _, p := range phases {
		run := func() error {
			err := p.run()
			if h.Done != nil {
				err = h.Done(ctx, p.name, err)
			}
			return err
		}
		var err error
		if h.Phase != nil {
			err = h.Phase(p.name, run)
		} else {
			err = run()
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Step returns the plan's step for role.
func (s *Session) Step(role string) (Step, bool) {
	for _, st := range s.Plan.Containers {
		if st.Role == role {
			return st, true
		}
	}
	return Step{}, false
}

// Find returns the created container of role, or nil.
func (s *Session) Find(role string) *Container {
	for _, c := range s.Containers {
		if c.Step.Role == role {
			return c
		}
	}
	return nil
}
