// Package hostoutput makes a run directory's output folders noexec,nosuid,
// nodev mounts of their own on this host (package noexec), for a backend
// whose record lands there: the Docker backend's host directories, bound
// into its containers, and the Kubernetes backend's copies read through
// the API. Each backend holds its run's [Mounts] and releases them at its
// teardown, on every path. It must not talk to an engine or a cluster:
// it acts on this host's run directory only.
//
// Threat: a native library a workload writes there, mapped executable
// in-process (ctypes.CDLL, dlopen), out of reach of Landlock's execute
// right, which does not see mmap (issue 16, probe G06 T12).
package hostoutput

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// EnvAllowExecOutput "1" lets a run go on when the host cannot make the
// output directories noexec (no CAP_SYS_ADMIN: not root), recorded as a
// degradation; without it such a run stops before any container starts.
const EnvAllowExecOutput = "MCPSIDECAR_ALLOW_EXEC_OUTPUT"

// hintNoexec is what a user can do when the mount cannot be made.
const hintNoexec = "run as root (mounting needs CAP_SYS_ADMIN in the Docker daemon's mount namespace), or accept " +
	"output directories a workload can map code from with " + EnvAllowExecOutput + "=1 (recorded as a degradation; probe G06 T12 reports it)"

// MountFunc makes dir a noexec mount of its own and returns its release.
type MountFunc func(dir string) (release func() error, err error)

// Noexec is package noexec's mount: the one a real run uses.
func Noexec(dir string) (func() error, error) {
	h, err := noexec.Mount(dir)
	if err != nil {
		return nil, err
	}
	return h.Release, nil
}

// Mounts are the noexec mounts one run made: the releases, and per role
// the container paths that must be noexec there.
type Mounts struct {
	mount    MountFunc
	release  []func() error
	targets  map[string][]string
	accepted bool // EnvAllowExecOutput: nothing is checked
}

// New is a run's mounts, made with mount (a backend's tests give their
// own; a real run [Noexec]).
func New(mount MountFunc) *Mounts {
	return &Mounts{mount: mount, targets: map[string][]string{}}
}

// Mount makes every writable bind mount of the plan, each a directory of
// this run, noexec on this host.
func (m *Mounts) Mount(r *sandbox.Job, plan *orchestrate.Plan) error {
	for i := range plan.Containers {
		st := &plan.Containers[i]
		for _, mt := range st.Spec.Mounts {
			if mt.ReadOnly {
				continue
			}
			if !within(mt.Source, r.Dir()) {
				return fmt.Errorf("the %s container's writable mount %s is outside the run directory: it cannot be made noexec", st.Role, mt.Source)
			}
			release, err := m.mount(mt.Source)
			if err != nil {
				return m.Accept(r, plan, fmt.Errorf("making the %s output directory noexec: %w", st.Role, err))
			}
			m.release = append(m.release, release)
			m.targets[st.Role] = append(m.targets[st.Role], mt.Target)
		}
	}
	SetExecAccepted(plan, "")
	return nil
}

// Accept stops the run with err unless the user accepted output
// directories that are not noexec; then it is a degradation, and the
// launcher is told which path to let pass its own check.
func (m *Mounts) Accept(r *sandbox.Job, plan *orchestrate.Plan, err error) error {
	if r.Getenv(EnvAllowExecOutput) != "1" {
		return exitcode.WithHint(exitcode.Unavailable, err, hintNoexec)
	}
	m.accepted = true
	r.Degrade(fmt.Sprintf("the output directories are not noexec (%v): a file a workload writes there can be mapped executable in-process; accepted by %s=1", err, EnvAllowExecOutput))
	SetExecAccepted(plan, outputTarget(plan))
	return nil
}

// Targets are the paths in role's container that must be noexec; none
// once the user accepted that they are not (Accepted).
func (m *Mounts) Targets(role string) []string { return m.targets[role] }

// Accepted reports whether the user accepted output directories that are
// not noexec (EnvAllowExecOutput): nothing is to be checked then.
func (m *Mounts) Accepted() bool { return m.accepted }

// Release removes every mount Mount made, on every path (--keep too: the
// files stay, a kept container keeps its own copy of the mount). One that
// cannot be removed is left to `mcpsidecar gc`, recorded as a degradation.
func (m *Mounts) Release(r *sandbox.Job) {
	if m == nil {
		return
	}
	var failed []string
	for _, release := range m.release {
		if err := release(); err != nil {
			failed = append(failed, err.Error())
		}
	}
	m.release = nil
	if len(failed) > 0 {
		r.Degrade("output directory mounts left behind (mcpsidecar gc removes them): " + strings.Join(failed, "; "))
	}
}

// SetExecAccepted sets, on a launcher step, the output path whose exec
// mount the user accepted ("" for none). Always set: the container's
// environment overrides the image's ENV, so an image cannot accept it.
func SetExecAccepted(plan *orchestrate.Plan, accepted string) {
	for i := range plan.Containers {
		cs := &plan.Containers[i].Spec
		if len(cs.Entrypoint) == 0 || cs.Entrypoint[0] != sandbox.LauncherPath {
			continue
		}
		env := cs.Env[:0]
		for _, e := range cs.Env {
			if e.Name != launcher.EnvExecAccepted {
				env = append(env, e)
			}
		}
		cs.Env = append(env, dockerx.EnvVar{Name: launcher.EnvExecAccepted, Value: accepted})
	}
}

// outputTarget is the agent-role container's output path.
func outputTarget(plan *orchestrate.Plan) string {
	for _, st := range plan.Containers {
		if st.Role != orchestrate.RoleAgent {
			continue
		}
		for _, m := range st.Spec.Mounts {
			if m.Source == st.OutputDir {
				return m.Target
			}
		}
	}
	return sandbox.DefaultOutputTarget
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
