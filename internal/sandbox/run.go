package sandbox

import (
	"context"
	"fmt"
	"io"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Job is one run in progress as its [Backend] sees it: what the lifecycle
// decided (the plan, the image, the options), where the backend records
// (phases, degradations, artifact problems, the run directory) and how it
// reports the workload's end. Every method is safe to call from one
// goroutine at a time, except ArtifactProblem and Warn, which a backend
// may call from several.
type Job struct{ j *job }

// Options are the lifecycle's options.
func (r *Job) Options() Options { return r.j.o }

// Profile is the resolved spec.
func (r *Job) Profile() *spec.Profile { return r.j.profile }

// ImageTag is our image's tag on the Docker engine.
func (r *Job) ImageTag() string { return r.j.image.Tag }

// Engine is the Docker engine the lifecycle was given: it built our
// image (a backend may export or push it from there).
func (r *Job) Engine() dockerx.Engine { return r.j.engine }

// Session holds the plan and the containers the backend created, which
// collect, the verdict and the metadata read.
func (r *Job) Session() *orchestrate.Session { return r.j.sess }

// Dir is the run directory's path.
func (r *Job) Dir() string { return r.j.dir.Path }

// Metadata is what run-metadata.json will hold (a backend may qualify a
// degradation already recorded).
func (r *Job) Metadata() *runs.Metadata { return &r.j.meta }

// Phase runs f as the named phase: a progress line and a record.
func (r *Job) Phase(name string, f func() error) error { return r.j.phases.do(name, f) }

// LastPhaseMS is how long the last phase took.
func (r *Job) LastPhaseMS() float64 {
	l := r.j.phases.list
	if len(l) == 0 {
		return 0
	}
	return l[len(l)-1].DurationMS
}

// Say prints a line for the user (stderr), as is.
func (r *Job) Say(format string, args ...any) { fmt.Fprintf(r.j.s.Err, format+"\n", args...) }

// Warn prints a warning.
func (r *Job) Warn(format string, args ...any) {
	fmt.Fprintf(r.j.s.Err, "warning: "+format+"\n", args...)
}

// Degrade records a degradation and warns of it.
func (r *Job) Degrade(d string) {
	r.j.meta.Degradations = append(r.j.meta.Degradations, d)
	r.Warn("%s", d)
}

// ArtifactProblem records a file not collected as is, and warns of it.
func (r *Job) ArtifactProblem(msg string) {
	r.j.problemsMu.Lock()
	defer r.j.problemsMu.Unlock()
	r.j.meta.ArtifactProblems = append(r.j.meta.ArtifactProblems, msg)
	r.Warn("not collected as is: %s", msg)
}

// WriteJSON writes an artifact of the run directory (secrets redacted).
func (r *Job) WriteJSON(name string, v any) error { return r.j.writeJSON(name, v) }

// WorkloadOutput is where the workload's stdout goes: the user's terminal
// and stdout.txt.
func (r *Job) WorkloadOutput() io.Writer { return io.MultiWriter(r.j.s.Out, &r.j.stdout) }

// WorkloadStarted says the workload runs (its output is collected).
func (r *Job) WorkloadStarted() { r.j.running = &orchestrate.Running{} }

// WorkloadExited records the workload's exit code.
func (r *Job) WorkloadExited(code int) { r.j.agentExit = &code }

// MountHostOutputs makes the run directory's output folders noexec on
// this host (as the Docker backend does with host directories).
func (r *Job) MountHostOutputs(plan *orchestrate.Plan) error { return r.j.mountHostOutputs(plan) }

// GC removes what this host's dead runs left on the Docker engine (the
// lifecycle does it at every preflight; gc's command too).
func (r *Job) GC(ctx context.Context) { r.j.gc(ctx) }
