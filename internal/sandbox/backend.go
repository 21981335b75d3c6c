package sandbox

import (
	"context"
	"io"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Backend is where a plan's containers run: Docker containers
// (internal/dockerbackend) or the pods of a Kubernetes cluster
// (internal/kube/backend). cli chooses one
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
//	teardown   removes every object the run created (not with --keep), and
//	           releases what it holds on this host (--keep too)
//	checks     the backend's own checks, added to the verdict
//	isolation  the backend's own measures of the isolation (test-sandbox):
//	           one that fails is an isolation violation, as a probe's is
//
// A backend reads and records through the [Job] it is given; what it
// holds for one run (its volumes, mounts, namespace) is its own value's,
// so cli makes one Backend per run. Neither lives here: sandbox imports
// no backend (internal/contract).
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

// GC is a backend's gc (`mcpsidecar gc`): it finds what runs left where
// the backend runs them (the Docker engine's containers, networks and
// volumes, internal/dockerbackend; a cluster's run namespaces,
// internal/kube/backend), removes what sel picks (this host's dead runs;
// with sel.Kept its kept runs too) and waits until each is gone. cli
// makes the one of the backend it chose and prints what it reports; it
// never asks which one it got.
type GC interface {
	Collect(ctx context.Context, sel orchestrate.Selection) (Collected, error)
}

// Collected is what a [GC] removed, as gc prints it and as gc --json
// writes it. A GC that could not look (no list of leftovers) returns no
// Doc, and its error alone; one that failed to remove some returns what
// it removed and the error.
type Collected struct {
	Removed []string // one line per object removed: "removed container NAME (run ID)"
	Summary string   // the count line: "gc: removed ..."
	Doc     any      // gc --json's document, after its schema
	// Kept, when set, says what gc left of kept runs and how to remove
	// them ("" for nothing); asked for the printed form only.
	Kept func(ctx context.Context) string
}
