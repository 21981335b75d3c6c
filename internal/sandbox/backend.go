package sandbox

import (
	"context"
	"errors"
	"io"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Backend is where a plan's containers run: Docker containers ([Docker])
// or the pods of a Kubernetes cluster (internal/kube/backend). cli chooses one
// (Options.Backend); the lifecycle calls it at fixed points and never
// asks which one it got. Our image is built on the Docker engine whatever
// the backend (the image phase), so the engine's checks (its version, its
// gc) are the lifecycle's.
//
// The calls, in the lifecycle's order; every one gets the run (j) and
// reads or records through it:
//
//	preflight  after the engine answered: the backend's own facts (is the
//	           engine on this host?) and what its dead runs left (gc)
//	input      may change the plan's input: what the backend cannot do
//	outputs    after the plan is built: each role's output place (host
//	           directories made noexec, engine volumes, pod volumes)
//	apply      creates the plan's objects, in the plan's order, and waits
//	           for the workload's end (its phases are its own)
//	stop       stops what still runs, in the plan's stop order, and reads
//	           each role's output where the lifecycle's collect finds it
//	logs       a created role's two output streams, for the record and
//	           for the error of a role that failed to start
//	teardown   removes every object the run created (not with --keep)
//	checks     the backend's own checks, added to the verdict
//	isolation  the backend's own measures of the isolation (test-sandbox):
//	           one that fails is an isolation violation, as a probe's is
//
// A backend reads and records through the [Job] it is given; the
// Kubernetes backend lives in internal/kube/backend, Docker's here.
type Backend interface {
	Name() string
	Preflight(ctx context.Context, r *Job) error
	Input(r *Job, in *orchestrate.Input) error
	Outputs(ctx context.Context, r *Job, plan *orchestrate.Plan) error
	Apply(ctx context.Context, r *Job) error
	Stop(ctx context.Context, r *Job)
	Logs(ctx context.Context, r *Job, c *orchestrate.Container, stdout, stderr io.Writer) error
	Teardown(ctx context.Context, r *Job) error
	Checks(r *Job) []runs.Check
	Isolation(r *Job) []runs.Check
}

// Docker is the default backend: the plan's containers on the Docker
// engine the lifecycle was given (orchestrate.Session).
func Docker() Backend { return dockerBackend{} }

// dockerBackend runs the plan on the engine through orchestrate.Session:
// host directories made noexec (outputmount.go) or engine volumes
// (outputvolume.go) for the output, helpers or the host for what is read
// inside a role (routehelper.go, outside.go).
type dockerBackend struct{}

func (dockerBackend) Name() string { return "docker" }

// Preflight decides whether the engine's processes are this host's, then
// reads its machine and mode (engineinfo.go): rootless, the limits it can
// enforce, the architecture the image's binary must be built for.
func (dockerBackend) Preflight(ctx context.Context, r *Job) error {
	if err := r.j.checkLocality(ctx); err != nil {
		return err
	}
	return r.j.checkEngineInfo(ctx, r.j.version)
}

// input chooses where the output goes (outputvolume.go, wantVolumes),
// and holds every role at start, hardened, until the host has read its
// process from outside (prepareHeld), on an old engine until its route
// is gone too.
func (dockerBackend) Input(r *Job, in *orchestrate.Input) error {
	j := r.j
	var err error
	if j.volumeMode, err = j.wantVolumes(); err != nil {
		return err
	}
	in.HoldAll = true
	return nil
}

func (dockerBackend) Outputs(ctx context.Context, r *Job, plan *orchestrate.Plan) error {
	return r.j.mountOutputs(ctx, plan)
}

func (dockerBackend) Apply(ctx context.Context, r *Job) error {
	j := r.j
	if j.volumes == nil { // a volume's size and inode limits are hard ones
		j.startOutputCap(ctx)
	} else {
		j.mirrorStop = j.startMirror(ctx) // outputvolume.go: the logs, live
	}
	return j.sess.Apply(ctx, orchestrate.Hooks{
		Phase: j.phases.do, Done: j.phaseDone, Stdout: io.MultiWriter(j.s.Out, &j.stdout), Stderr: io.MultiWriter(j.s.Err, &j.stderr),
		ReadyTimeout: j.o.ReadyTimeout, Timeout: j.o.Timeout, StopAtExit: !j.o.Keep,
	})
}

// stop stops the services in the plan's order (orchestrate.Session.Stop);
// kept servers (gateway, sidecar) stay up for the user to talk to. The
// output that went to engine volumes is read by collect.
func (dockerBackend) Stop(ctx context.Context, r *Job) {
	if !r.j.o.Keep {
		r.j.sess.Stop(ctx)
	}
}

// logs reads a container's two streams from the engine.
func (dockerBackend) Logs(ctx context.Context, r *Job, c *orchestrate.Container, stdout, stderr io.Writer) error {
	return r.j.sess.Engine.Logs(ctx, c.ID, stdout, stderr)
}

// teardown removes the session's containers and networks, then the
// output volumes and their holder; when the run failed while they were
// made, before any session, only those.
func (dockerBackend) Teardown(ctx context.Context, r *Job) error {
	j := r.j
	if j.sess == nil {
		return j.removeOutputVolumes(ctx)
	}
	j.sess.CloseProcesses()
	if j.o.Keep {
		j.keep()
		return nil
	}
	return errors.Join(j.sess.Teardown(ctx), j.removeOutputVolumes(ctx))
}

// checks: the engine's bridge holds no address of the host (outside.go).
func (dockerBackend) Checks(r *Job) []runs.Check { return r.j.bridgeChecks() }

// isolation: the probe suite measures it all on this backend.
func (dockerBackend) Isolation(*Job) []runs.Check { return nil }
