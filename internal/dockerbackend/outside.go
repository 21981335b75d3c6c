package dockerbackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// observer reads each role's process from outside once the role has
// written its hardening report. Threat: the report is written by the
// workload in a directory it controls, so a hostile workload can forge
// it; the kernel's /proc/<pid>/status cannot be forged from inside.
type observer struct {
	mu      sync.Mutex
	seen    map[string]runs.Observation
	claimed map[string]bool // roles whose observation has begun
	wg      sync.WaitGroup
	stop    chan struct{}
}

// observeEvery is how often the observer looks for a role's report.
const observeEvery = 2 * time.Millisecond

func newObserver() *observer {
	return &observer{seen: map[string]runs.Observation{}, stop: make(chan struct{})}
}

// watch follows the container c of role until its report appears, then
// reads its process status, through its init proven to be on this host
// (c.Process). It gives up when the process is gone or at close. Without
// a proven process it reads nothing: when the proof failed the
// observation says why (Unproven), and its check fails. The channel it
// returns is closed once the observation is recorded.
func (o *observer) watch(role, reportPath string, c *orchestrate.Container) <-chan struct{} {
	done := make(chan struct{})
	if c.Process == nil {
		o.record(role, unobserved(c.Pid, c.ProcessErr))
		close(done)
		return done
	}
	p := c.Process
	ended := p.WatchExit(o.stop)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer close(done)
		tick := time.NewTicker(observeEvery)
		defer tick.Stop()
		for {
			if _, err := os.Lstat(reportPath); err == nil {
				o.record(role, observe(p))
				return
			}
			select {
			case <-ended:
				o.record(role, runs.Observation{Detail: "not observed: the process ended before it wrote its hardening report",
					Unproven: "the process ended before it wrote its hardening report"})
				return
			case <-o.stop:
				o.record(role, runs.Observation{Detail: "not observed: the role wrote no hardening report while it ran",
					Unproven: "the role wrote no hardening report while it ran"})
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// unobserved is the observation of a container whose init was not proven
// (err, nil when it never ran: pid 0). Without a process id nothing was
// looked at: that fails the check too (the engine had reported no
// running process when the container was inspected).
func unobserved(pid int, err error) runs.Observation {
	switch {
	case pid <= 0 || err == nil:
		why := "no process id: the engine reported no running process when the container was inspected"
		return runs.Observation{Detail: "not observed: " + why, Unproven: why}
	case errors.Is(err, dockerx.ErrProcessGone):
		why := "the process ended before it could be read"
		return runs.Observation{Detail: "not observed: " + why, Unproven: why}
	}
	return runs.Observation{Detail: "not observed: " + err.Error(), Unproven: err.Error()}
}

func observe(p dockerx.Process) runs.Observation {
	st, err := p.RoleStatus()
	if errors.Is(err, dockerx.ErrNotOnThisHost) || errors.Is(err, dockerx.ErrProcessGone) {
		return unobserved(p.Pid(), err)
	}
	if err != nil {
		return runs.Observation{Detail: "not observed: " + err.Error(), Unproven: err.Error()}
	}
	return runs.Observation{Seen: true, Seccomp: st.Seccomp, SeccompFilters: st.SeccompFilters,
		NoNewPrivs: st.NoNewPrivs, CapEff: fmt.Sprintf("%016x", st.CapEff), UID: st.UID}
}

// claim reports whether role's observation may begin: only once.
func (o *observer) claim(role string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.claimed == nil {
		o.claimed = map[string]bool{}
	}
	if o.claimed[role] {
		return false
	}
	o.claimed[role] = true
	return true
}

// record keeps the first observation of role: one recorded when a held
// role was released unread (observeHeld) is not replaced by a reading
// made after its release (red team, session 37).
func (o *observer) record(role string, ob runs.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[role]; !ok {
		o.seen[role] = ob
	}
}

// close stops the watches and returns what was seen.
func (o *observer) close() map[string]runs.Observation {
	close(o.stop)
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen
}

// observeRole starts watching role's container, if it ran and was not
// held (a held role is observed before its release, observeHeld).
func (b *backend) observeRole(role string) {
	c := b.r.Session().Find(role)
	if c == nil || b.obs == nil || (role == orchestrate.RoleGateway && b.r.Options().GatewayEngine == orchestrate.EngineSquid) || !b.obs.claim(role) {
		return
	}
	if b.volumes != nil { // the report is in an engine volume: look through the engine
		b.startObserving(context.Background(), c, false)
		return
	}
	b.watchOnHost(c)
}

// watchOnHost reads c's processes on this host once its role's report is
// in the run directory (observer.watch).
func (b *backend) watchOnHost(c *orchestrate.Container) <-chan struct{} {
	role := c.Step.Role
	return b.obs.watch(role, filepath.Join(b.r.Dir(), role, runs.FileHardenReport), c)
}

// observeHeld reads a held role's process from outside before its
// release (prepareHeld). The role waits for the release hardened, its
// report written (internal/hold), so what is read is what it runs with,
// and it cannot end before it is read: through a helper on the
// engine-only path (startObserving, which waits for the answer), through
// its init proven to be on this host otherwise, once its report exists.
// Past helperTimeout the role is released unread, and its check fails.
func (b *backend) observeHeld(ctx context.Context, c *orchestrate.Container) {
	role := c.Step.Role
	if b.obs == nil || !b.obs.claim(role) {
		return
	}
	if b.volumes != nil {
		b.startObserving(ctx, c, true)
		return
	}
	timer := time.NewTimer(helperTimeout)
	defer timer.Stop()
	var why string
	select {
	case <-b.watchOnHost(c):
		return
	case <-timer.C:
		why = fmt.Sprintf("the role was released unread: no hardening report within %s", helperTimeout)
	case <-ctx.Done():
		why = "the run ended before the role was read: " + ctx.Err().Error()
	}
	b.obs.record(role, runs.Observation{Detail: "not observed: " + why, Unproven: why})
}

// bridgeAddrs is dockerx.BridgeAddrs; the lifecycle's tests, whose
// networks exist only in a fake engine, answer for it.
var bridgeAddrs = dockerx.BridgeAddrs

// bridgeChecks: the host holds no IPv4 address on any internal network of
// the run (dockerx.OptionInhibitIPv4), so nothing inside can reach a host
// service through a gateway address.
func (b *backend) bridgeChecks() []runs.Check {
	var checks []runs.Check
	for _, n := range b.r.Session().Networks {
		if !n.Internal {
			continue
		}
		if b.volumes != nil && (!b.r.Metadata().Engine.Local || b.r.Metadata().Engine.Rootless) {
			// The bridge is on the engine's host, not this one, or in
			// rootlesskit's network namespace there.
			checks = append(checks, b.bridgeCheckByHelper(n))
			continue
		}
		c := runs.Check{Name: "host has no address on " + n.Name}
		addrs, err := bridgeAddrs(n.ID)
		switch {
		case err != nil:
			c.Detail = err.Error()
		case len(addrs) > 0:
			c.Detail = "the host holds " + strings.Join(addrs, ", ")
		default:
			c.OK, c.Detail = true, "no IPv4 address on the bridge"
		}
		checks = append(checks, c)
	}
	return checks
}

// finishObserving stores what the observer saw in the metadata.
func (b *backend) finishObserving() {
	if b.obs == nil {
		return
	}
	seen := b.obs.close()
	b.obs = nil
	if len(seen) == 0 {
		return
	}
	b.r.Metadata().Observed = seen
	roles := make([]string, 0, len(seen))
	for r := range seen {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	for _, r := range roles {
		if ob := seen[r]; !ob.Seen && !b.r.Options().Quiet {
			b.r.Say("note: %s hardening %s", r, ob.Detail)
		}
	}
}
