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

// Getenv reads the host's environment (Options.Getenv, or the process's).
func (r *Job) Getenv(name string) string { return r.j.getenv(name) }

// EngineVersion is what the Docker engine's /version said at preflight.
func (r *Job) EngineVersion() dockerx.EngineVersion { return r.j.version }

// OldEngine reports whether the engine is older than the oldest that
// keeps internal networks without a route out (internal/enginever): its
// internal roles are held until their default route is gone.
func (r *Job) OldEngine() bool { return r.j.oldEngine() }

// ImageFiles are our image's files, as built: the binary the launcher
// and the holder copy is among them.
func (r *Job) ImageFiles() dockerx.ImageFiles { return r.j.image }

// HoldToken is the run's release token (internal/hold): a held role
// starts only once its release file holds it.
func (r *Job) HoldToken() string { return r.j.holdToken }

// RunDir is the run directory, for a backend that writes there or
// measures it (a role's release file, its output's usage).
func (r *Job) RunDir() *runs.Dir { return r.j.dir }

// WorkloadErrors is where the workload's stderr goes: the user's terminal
// and stderr.txt.
func (r *Job) WorkloadErrors() io.Writer { return io.MultiWriter(r.j.s.Err, &r.j.stderr) }

// PhaseDone records what a phase of the plan left and words its error
// (orchestrate.Hooks.Done): the networks, a role's start (a service's
// start results), the workload's end.
func (r *Job) PhaseDone(ctx context.Context, phase string, err error) error {
	return r.j.phaseDone(ctx, phase, err)
}

// OutputsOverCap records the roles whose output passed its cap, and what
// was found (the verdict fails each one's check).
func (r *Job) OutputsOverCap(over map[string]string) { r.j.outputOver = over }

// Kept records a sandbox kept by --keep and tells the user how to remove
// it: removeCommand, sh -c "...", removes everything the run left.
func (r *Job) Kept(removeCommand []string) { r.j.keep(removeCommand) }
