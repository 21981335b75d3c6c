package orchestrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
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
// not named by a step's role.
const (
	PhaseNetworks = "networks"
	PhaseWait     = "wait"
)

// Phases are the phases [Session.Apply] walks for the plan, in order: the
// networks, one per container step named by its role, and, after the
// workload's step, the wait for its exit.
func (p Plan) Phases() []string {
	out := []string{PhaseNetworks}
	for _, st := range p.Containers {
		out = append(out, st.Role)
		if st.Workload {
			out = append(out, PhaseWait)
		}
	}
	return out
}

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

// CreateNetworks creates the plan's networks, each on a free /28 of the
// plan's pool (see subnet.go); the plan records the subnets used, and each
// container's fixed address on the internal network (planAddresses).
func (s *Session) CreateNetworks(ctx context.Context) error {
	alloc, err := s.subnets(ctx)
	if err != nil {
		return err
	}
	// Created together (each its own round trip, and neither depends on
	// the other), recorded in the plan's order; one that failed is not
	// recorded, the other is, so teardown removes it. Their first subnets
	// are taken in the plan's order, so a run on a free pool gets the
	// same ones as one after the other.
	ids := make([]string, len(s.Plan.Networks))
	errs := make([]error, len(s.Plan.Networks))
	firsts := make([]netip.Prefix, len(s.Plan.Networks))
	for i := range firsts {
		if alloc != nil {
			if firsts[i], errs[i] = alloc.Next(); errs[i] != nil {
				errs[i] = fmt.Errorf("creating network %s: %w", s.Plan.Networks[i].Name, errs[i])
			}
		}
	}
	var wg sync.WaitGroup
	for i := range s.Plan.Networks {
		if errs[i] != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = s.createNetwork(ctx, alloc, &s.Plan.Networks[i], firsts[i])
		}()
	}
	wg.Wait()
	for i, n := range s.Plan.Networks {
		if errs[i] == nil {
			s.Networks = append(s.Networks, CreatedNetwork{Name: n.Name, ID: ids[i], Internal: n.Internal, Subnet: n.Subnet})
		}
	}
	if err := firstError(errs); err != nil {
		return err
	}
	return s.planAddresses()
}

// firstError is the first error of errs that is not a cancellation
// caused by another, or else the first one.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// planAddresses gives each container attached to the internal network a
// fixed address of its subnet, in the plan's order, after the one the
// engine reserves for the bridge. Every container's host entries are then
// known before any peer has started, so all can be created up front. A
// network without a subnet (the engine's pools) gets none: its
// containers are created one by one, each once its peers run.
func (s *Session) planAddresses() error {
	name := s.internalNetwork()
	var sub netip.Prefix
	var bridge netip.Addr
	for _, n := range s.Plan.Networks {
		if n.Name != name || n.Subnet == "" {
			continue
		}
		p, err := netip.ParsePrefix(n.Subnet)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("planning addresses: network %s: subnet %q is not an IPv4 range", n.Name, n.Subnet)
		}
		sub, bridge = p.Masked(), gatewayOf(p.Masked())
		if n.Gateway != "" {
			if bridge, err = netip.ParseAddr(n.Gateway); err != nil {
				return fmt.Errorf("planning addresses: network %s: gateway %q: %w", n.Name, n.Gateway, err)
			}
		}
	}
	if !sub.IsValid() {
		return nil
	}
	next := sub.Addr()
	for i := range s.Plan.Containers {
		nets := s.Plan.Containers[i].Spec.Networks
		for j := range nets {
			if nets[j].Network != name || nets[j].IPv4 != "" {
				continue
			}
			for next = next.Next(); next == bridge; next = next.Next() {
			}
			if !sub.Contains(next.Next()) { // the last address is the broadcast
				return fmt.Errorf("planning addresses: network %s (%s) has no address left for %s", name, sub, s.Plan.Containers[i].Role)
			}
			nets[j].IPv4 = next.String()
		}
	}
	return nil
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

// hostEntries are the step's peers as host:address entries, from the
// addresses planned for the peers on the internal network, or else the
// ones they got there.
func (s *Session) hostEntries(st Step) ([]string, error) {
	var out []string
	for _, h := range st.Hosts {
		ip := s.plannedAddress(h.Role)
		if peer := s.Find(h.Role); ip == "" && peer != nil {
			ip = peer.IPs[s.internalNetwork()]
		}
		if ip == "" {
			return nil, fmt.Errorf("creating %s: %s (%s) has no address on the internal network", st.Role, h.Name, h.Role)
		}
		out = append(out, h.Name+":"+ip)
	}
	return out, nil
}

// plannedAddress is role's fixed address on the internal network, or "".
func (s *Session) plannedAddress(role string) string {
	st, _ := s.Step(role)
	for _, a := range st.Spec.Networks {
		if a.Network == s.internalNetwork() {
			return a.IPv4
		}
	}
	return ""
}

func (s *Session) internalNetwork() string {
	for _, n := range s.Plan.Networks {
		if n.Internal {
			return n.Name
		}
	}
	return ""
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

func (s *Session) awaitReady(ctx context.Context, c *Container, timeout time.Duration) error {
	state := dockerx.ContainerState{Running: true, Pid: c.Pid, IPs: c.IPs}
	if !c.inspected { // a held container was inspected at its release
		var err error
		if state, err = s.inspect(ctx, c); err != nil {
			return err
		}
	}
	if !state.Running || state.Pid == 0 || errors.Is(c.ProcessErr, dockerx.ErrProcessGone) {
		// Exited already: the engine has dropped its addresses.
		code := state.ExitCode
		select {
		case r := <-c.wait:
			code = r.ExitCode
		case <-time.After(2 * time.Second):
		}
		c.ExitCode = &code
		return fmt.Errorf("%s exited with code %d before it was ready", c.Step.Role, code)
	}
	if s.AwaitReady != nil {
		c.ReadyBy = ReadyByHelper
		return s.awaitByHelper(ctx, c, timeout)
	}
	if c.Process == nil {
		// Not proven to be on this host: nothing is asked of the number
		// the engine gave, and its word that the container runs stands.
		c.ReadyBy = ReadyByEngine + ": " + c.ProcessErr.Error()
		return nil
	}
	what, check := s.readiness(c.Step.Ready, c)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	// Checked again after 5 ms, then twice as long each time up to 50 ms:
	// a server is usually ready within tens of milliseconds of its start.
	pause := 5 * time.Millisecond
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if errors.Is(last, os.ErrPermission) && c.ReadyBy == "" {
			// Not root: the namespace cannot be entered. Watching for
			// the listening socket needs no privilege and sends nothing.
			c.ReadyBy = ReadyByListening
			what, check = "listening socket on port "+strconv.Itoa(c.Step.Ready.Port), func(context.Context) error {
				return listening(c.Process, c.Step.Ready.Port)
			}
			continue
		}
		select {
		case r := <-c.wait:
			code := r.ExitCode
			c.ExitCode = &code
			return fmt.Errorf("%s exited with code %d before it was ready", c.Step.Role, code)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not ready after %s: %s: %w", c.Step.Role, timeout, what, last)
			}
			return ctx.Err()
		case <-time.After(pause):
			pause = min(2*pause, 50*time.Millisecond)
		}
	}
}

// awaitByHelper waits for s.AwaitReady, or c's exit, or ctx's end.
func (s *Session) awaitByHelper(ctx context.Context, c *Container, timeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.AwaitReady(ctx, c, timeout) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s not ready after %s: %w", c.Step.Role, timeout, err)
		}
		return nil
	case r := <-c.wait:
		code := r.ExitCode
		c.ExitCode = &code
		return fmt.Errorf("%s exited with code %d before it was ready", c.Step.Role, code)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inspect reads c's state; while it runs, its pid and addresses are
// recorded, and each fixed address is checked: the peers' host entries
// name it, so a container elsewhere could not be reached by them.
func (s *Session) inspect(ctx context.Context, c *Container) (dockerx.ContainerState, error) {
	state, err := s.Engine.InspectContainer(ctx, c.ID)
	if err != nil {
		return state, err
	}
	c.Pid, c.IPs = state.Pid, state.IPs
	if !state.Running || state.Pid == 0 {
		return state, nil // exited: the engine has dropped its addresses
	}
	c.inspected = true
	if c.Process == nil && c.ProcessErr == nil {
		c.Process, c.ProcessErr = s.Engine.Process(ctx, c.ID, state)
	}
	for _, a := range c.Step.Spec.Networks {
		if a.IPv4 != "" && state.IPs[a.Network] != a.IPv4 {
			return state, fmt.Errorf("%s has the address %q on network %s, not the planned %s that its peers' host entries name",
				c.Step.Role, state.IPs[a.Network], a.Network, a.IPv4)
		}
	}
	return state, nil
}

// ReadyByListening is recorded in Container.ReadyBy when readiness was
// judged from the container's listening socket instead of a request.
const ReadyByListening = "listening socket (the host may not enter the container's network namespace)"

// ReadyByHelper is recorded in Container.ReadyBy when readiness was
// judged by a helper container in the service's network namespace.
const ReadyByHelper = "helper container in the container's network namespace that asked its own loopback until it answered"

// ReadyByEngine is recorded in Container.ReadyBy, with the reason, when
// the container's init could not be proven to be on this host: the
// service was taken as ready once the engine reported it running.
const ReadyByEngine = "the engine's report that the container runs (the host checked nothing of its process)"

// readiness is the check of r for c: a request to its own loopback from
// inside its init's network namespace.
func (s *Session) readiness(r *Readiness, c *Container) (string, func(context.Context) error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port))
	dial := func(ctx context.Context) (net.Conn, error) { return dialNetns(ctx, c.Process, addr) }
	if r.TCP {
		return "TCP connect " + addr + " in the container", func(ctx context.Context) error {
			conn, err := dial(ctx)
			if err != nil {
				return err
			}
			return conn.Close()
		}
	}
	url := "http://" + addr + r.Path
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		Proxy: nil, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}}
	return "GET " + url + " in the container", func(ctx context.Context) error { return inside.GetOK(ctx, client, url) }
}

// dialNetns is the only way the session connects to a container. Threat:
// the host has no address on the internal network, so a connection to a
// container's address there would leave by the host's default route; the
// guard refuses anything but loopback, which is always the container's
// own inside its namespace.
func dialNetns(ctx context.Context, p dockerx.Process, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("refusing to connect to %s: the host connects to containers only on their own loopback", addr)
	}
	return p.DialInNetns(ctx, addr)
}

func listening(p dockerx.Process, port int) error {
	ok, err := p.Listening(port)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("nothing listens on port %d yet", port)
	}
	return nil
}

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
