package dockerbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/enginever"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/hostoutput"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// New is the default backend: the plan's containers on the Docker engine
// the lifecycle was given (orchestrate.Session). One Backend is one
// run's: it holds the run's output places and observations.
func New() sandbox.Backend { return &backend{} }

// backend runs the plan on the engine through orchestrate.Session:
// host directories made noexec (outputmount.go) or engine volumes
// (outputvolume.go) for the output, helpers or the host for what is read
// inside a role (routehelper.go, outside.go).
type backend struct {
	r          *sandbox.Job       // the run, as every call of the seam gives it
	noexec     *hostoutput.Mounts // the output directories' noexec mounts (outputmount.go)
	volumeMode bool               // the output goes to engine volumes (outputvolume.go, wantVolumes)
	volumes    *outputVolumes     // the output volumes and their holder, when output goes through the engine (outputvolume.go)
	obs        *observer          // reads each role's process from outside (outside.go)
	outCap     *outputCap         // stops a role whose output passes its cap (outputcap.go)
}

// hostPrefixes is the session's (orchestrate.Session.HostPrefixes; nil
// is the host's own); the backend's tests answer for it.
var hostPrefixes func() ([]netip.Prefix, error)

func (b *backend) Name() string { return "docker" }

// Preflight decides whether the engine's processes are this host's, then
// reads its machine and mode (engineinfo.go): rootless, the limits it can
// enforce, the architecture the image's binary must be built for.
func (b *backend) Preflight(ctx context.Context, r *sandbox.Job) error {
	b.r = r
	if err := b.checkLocality(ctx); err != nil {
		return err
	}
	return b.checkEngineInfo(ctx, r.EngineVersion())
}

// checkLocality decides, once for the run, whether the engine's process
// ids are this host's, and records it. An engine that is not local is used
// through its API only: readiness is its word, the checks that read a
// container's process fail. An old engine, whose internal containers the
// host must enter to remove their default route, is refused then, before
// anything is created.
func (b *backend) checkLocality(ctx context.Context) error {
	l := b.r.Engine().Locality(ctx)
	e := &b.r.Metadata().Engine
	e.Local, e.Locality = l.Local, l.Reason
	if l.Local {
		return nil
	}
	if b.r.OldEngine() && b.r.Getenv(EnvOutput) == "bind" {
		// Through the engine (outputvolume.go), a helper removes the
		// route from inside the container's own namespace.
		return exitcode.WithHint(exitcode.Unavailable,
			fmt.Errorf("refused: an engine older than %d (here %s) needs the host to remove the default route inside each internal container, and %v (%s)",
				enginever.Min, e.Version, dockerx.ErrNotOnThisHost, l.Reason),
			"run mcpsidecar on the engine's host, reaching it by its local unix socket, leave "+EnvOutput+" unset (the output and the route go through the engine), or upgrade the engine to 26 or later")
	}
	b.r.Warn("%v (%s): readiness is the engine's word; the host reads no container's process, helpers of the engine do",
		dockerx.ErrNotOnThisHost, l.Reason)
	return nil
}

// Input chooses where the output goes (outputvolume.go, wantVolumes),
// and holds every role at start, hardened, until the host has read its
// process from outside (prepareHeld), on an old engine until its route
// is gone too.
func (b *backend) Input(r *sandbox.Job, in *orchestrate.Input) error {
	b.r = r
	var err error
	if b.volumeMode, err = b.wantVolumes(); err != nil {
		return err
	}
	in.HoldAll = true
	return nil
}

func (b *backend) Outputs(ctx context.Context, r *sandbox.Job, plan *orchestrate.Plan) error {
	b.r = r
	return b.mountOutputs(ctx, plan)
}

// Apply carries the plan out on the engine (orchestrate.Session.Apply),
// each held role read from outside before its release (prepareHeld), and
// waits for the workload's end. Meanwhile the output directories are
// measured against their cap (outputcap.go) or, in engine volumes, the
// roles' logs copied live into the run directory (outputvolume.go), a
// last time before Apply returns, which the lifecycle's watcher's last
// read sees.
func (b *backend) Apply(ctx context.Context, r *sandbox.Job) error {
	b.r = r
	sess := r.Session()
	sess.HostPrefixes = hostPrefixes
	b.obs = newObserver()
	sess.Prepare = b.prepareHeld
	if b.volumes != nil {
		sess.AwaitReady = b.awaitReadyByHelper // outputvolume.go's engine-only path
	}
	sess.Release = func(st orchestrate.Step) error {
		if b.volumes != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), helperTimeout)
			defer cancel()
			return b.releaseHeld(rctx, st.Role)
		}
		return hold.Release(st.Role, r.HoldToken(), r.RunDir().Write)
	}
	if b.volumes == nil { // a volume's size and inode limits are hard ones
		b.startOutputCap(ctx)
	} else {
		defer b.startMirror(ctx)() // the logs, live, and a last copy
	}
	o := r.Options()
	return sess.Apply(ctx, orchestrate.Hooks{
		Phase: r.Phase, Done: b.phaseDone, Stdout: r.WorkloadOutput(), Stderr: r.WorkloadErrors(),
		ReadyTimeout: o.ReadyTimeout, Timeout: o.Timeout, StopAtExit: !o.Keep,
	})
}

// phaseDone checks, once a role has started, that its output is noexec
// inside it (outputmount.go) and begins reading its process from outside
// (outside.go); the lifecycle records the rest (sandbox.Job.PhaseDone).
func (b *backend) phaseDone(ctx context.Context, phase string, err error) error {
	if phase != orchestrate.PhaseNetworks && phase != orchestrate.PhaseWait {
		if err == nil {
			err = b.checkOutputMount(phase)
		}
		b.observeRole(phase)
	}
	return b.r.PhaseDone(ctx, phase, err)
}

// prepareHeld looks at a held role before it is released: its old
// engine's default route removed (Step.DropRoute), then its hardening
// read from outside (observeHeld). The role waits, hardened, for the
// release that follows.
func (b *backend) prepareHeld(ctx context.Context, c *orchestrate.Container) error {
	if c.Step.DropRoute {
		if err := b.dropDefaultRoute(ctx, c); err != nil {
			return err
		}
	}
	b.observeHeld(ctx, c)
	return nil
}

// dropDefaultRoute removes the default route an old engine gives a
// container on an internal network. On the engine-only path a helper in
// the container's network namespace does it. Otherwise, when the host
// cannot (not root), the run goes on with the route, recorded as a
// degradation. When the container's init is not proven to be on this
// host, nothing is entered and the run stops. Threat: the pid the engine
// reported names another process here (a remote or virtualised engine);
// entering its namespace as root would delete a default route of
// whatever namespace it is in, this host's own included.
func (b *backend) dropDefaultRoute(ctx context.Context, c *orchestrate.Container) error {
	if b.volumes != nil {
		return b.dropRouteByHelper(ctx, c)
	}
	role := c.Step.Role
	if c.Process == nil {
		return exitcode.WithHint(exitcode.Unavailable,
			fmt.Errorf("removing the default route of %s: refused, no namespace entered: %w", role, c.ProcessErr),
			"Docker Engine older than 26 needs the host to remove the route inside each internal container: run mcpsidecar on the engine's host, "+
				"reaching it by its local unix socket, or upgrade the engine")
	}
	if err := c.Process.DropDefaultRoutes(); err != nil {
		b.r.Degrade(fmt.Sprintf("%s keeps the default route of its internal network: %v", role, err))
	}
	return nil
}

// Stop ends the output cap's measuring, stops the services in the plan's
// order (orchestrate.Session.Stop; kept servers, the gateway and the
// sidecar, stay up for the user to talk to), records what the observer
// saw, and reads the output that went to engine volumes into the run
// directory, where the lifecycle's collect finds it.
func (b *backend) Stop(ctx context.Context, r *sandbox.Job) {
	b.r = r
	r.OutputsOverCap(b.stopOutputCap())
	if !r.Options().Keep {
		r.Session().Stop(ctx)
	}
	b.finishObserving()
	b.readOutputVolumes(ctx)
}

// Logs reads a container's two streams from the engine.
func (b *backend) Logs(ctx context.Context, r *sandbox.Job, c *orchestrate.Container, stdout, stderr io.Writer) error {
	return r.Engine().Logs(ctx, c.ID, stdout, stderr)
}

// Teardown removes the session's containers and networks, then the
// output volumes and their holder; when the run failed while they were
// made, before any session, only those. The output directories' noexec
// mounts are released on every path, --keep too.
func (b *backend) Teardown(ctx context.Context, r *sandbox.Job) error {
	b.r = r
	defer b.noexec.Release(r)
	sess := r.Session()
	if sess == nil {
		return b.removeOutputVolumes(ctx)
	}
	sess.CloseProcesses()
	if r.Options().Keep {
		r.Kept(b.volumes.removeCommand(sess.RemoveCommand()))
		return nil
	}
	return errors.Join(sess.Teardown(ctx), b.removeOutputVolumes(ctx))
}

// Checks: the engine's bridge holds no address of the host (outside.go).
func (b *backend) Checks(r *sandbox.Job) []runs.Check {
	b.r = r
	return b.bridgeChecks()
}

// Isolation: the probe suite measures it all on this backend.
func (b *backend) Isolation(*sandbox.Job) []runs.Check { return nil }
