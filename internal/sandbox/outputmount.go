package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// Every writable path of every container is noexec (issue 16, probe
// G06 T12). The tmpfs mounts are by their options (internal/spec); the
// output directories are bind mounts, which Docker cannot mount noexec,
// so the host makes each one a noexec,nosuid,nodev mount of its own
// before any container starts (package noexec), checks from outside that
// each container sees it so, and unmounts it at the end of every run.
// Threat: a native library a workload writes there, mapped executable
// in-process (ctypes.CDLL, dlopen), out of reach of Landlock's execute
// right, which does not see mmap.

// EnvAllowExecOutput "1" lets a run go on when the host cannot make the
// output directories noexec (no CAP_SYS_ADMIN: not root), recorded as a
// degradation; without it such a run stops before any container starts.
const EnvAllowExecOutput = "MCPSIDECAR_ALLOW_EXEC_OUTPUT"

// hintNoexec is what a user can do when the mount cannot be made.
const hintNoexec = "run as root (mounting needs CAP_SYS_ADMIN in the Docker daemon's mount namespace), or accept " +
	"output directories a workload can map code from with " + EnvAllowExecOutput + "=1 (recorded as a degradation; probe G06 T12 reports it)"

// mountNoexec and seenNoexec are package noexec's; the lifecycle's tests,
// whose containers exist only in a fake engine, replace them.
var (
	mountNoexec = func(dir string) (func() error, error) {
		h, err := noexec.Mount(dir)
		if err != nil {
			return nil, err
		}
		return h.Release, nil
	}
	seenNoexec = func(p dockerx.Process, target string) error {
		mountinfo, err := p.Mountinfo()
		if err != nil {
			return err
		}
		return noexec.SeenIn(mountinfo, target)
	}
)

// outputMounts is what mountOutputs made: the releases, and per role the
// container paths that must be noexec there.
type outputMounts struct {
	release  []func() error
	targets  map[string][]string
	accepted bool // EnvAllowExecOutput: nothing is checked
}

// mountOutputs gives each role of a Docker run its output place: an
// engine volume (outputvolume.go), or its directory of this run made
// noexec on this host, which only a local engine's containers see. A
// writable mount from anywhere else is refused rather than remounted.
func (j *job) mountOutputs(ctx context.Context, plan *orchestrate.Plan) error {
	j.noexec = &outputMounts{targets: map[string][]string{}}
	if j.volumeMode {
		return j.useOutputVolumes(ctx, plan)
	}
	if !j.meta.Engine.Local {
		// The engine binds the paths on its own host, and its
		// containers' mounts cannot be read from here (no process of
		// theirs is on this host): nothing made here would hold there.
		err := fmt.Errorf("the output directories cannot be made noexec, nor checked, for an engine whose containers are not on this host: %w (%s)",
			dockerx.ErrNotOnThisHost, j.meta.Engine.Locality)
		if j.getenv(EnvAllowExecOutput) != "1" {
			return exitcode.WithHint(exitcode.Unavailable, err, "run mcpsidecar on the engine's host, reaching it by its local unix socket, or accept "+
				"output directories a workload can map code from with "+EnvAllowExecOutput+"=1")
		}
		return j.execOutputAccepted(plan, err)
	}
	return j.mountHostOutputs(plan)
}

// mountHostOutputs makes every writable bind mount of the plan, each a
// directory of this run, noexec on this host.
func (j *job) mountHostOutputs(plan *orchestrate.Plan) error {
	if j.noexec == nil {
		j.noexec = &outputMounts{targets: map[string][]string{}}
	}
	for i := range plan.Containers {
		st := &plan.Containers[i]
		for _, m := range st.Spec.Mounts {
			if m.ReadOnly {
				continue
			}
			if !within(m.Source, j.dir.Path) {
				return fmt.Errorf("the %s container's writable mount %s is outside the run directory: it cannot be made noexec", st.Role, m.Source)
			}
			release, err := mountNoexec(m.Source)
			if err != nil {
				return j.execOutputAccepted(plan, fmt.Errorf("making the %s output directory noexec: %w", st.Role, err))
			}
			j.noexec.release = append(j.noexec.release, release)
			j.noexec.targets[st.Role] = append(j.noexec.targets[st.Role], m.Target)
		}
	}
	setLauncherEnv(plan, "")
	return nil
}

// execOutputAccepted stops the run unless the user accepted output
// directories that are not noexec; then it is a degradation, and the
// launcher is told which path to let pass its own check.
func (j *job) execOutputAccepted(plan *orchestrate.Plan, err error) error {
	if j.getenv(EnvAllowExecOutput) != "1" {
		return exitcode.WithHint(exitcode.Unavailable, err, hintNoexec)
	}
	j.noexec.accepted = true
	d := fmt.Sprintf("the output directories are not noexec (%v): a file a workload writes there can be mapped executable in-process; accepted by %s=1", err, EnvAllowExecOutput)
	j.meta.Degradations = append(j.meta.Degradations, d)
	fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	setLauncherEnv(plan, outputTarget(plan))
	return nil
}

// setLauncherEnv sets, on a launcher step, the output path whose exec
// mount the user accepted ("" for none). Always set: the container's
// environment overrides the image's ENV, so an image cannot accept it.
func setLauncherEnv(plan *orchestrate.Plan, accepted string) {
	for i := range plan.Containers {
		cs := &plan.Containers[i].Spec
		if len(cs.Entrypoint) == 0 || cs.Entrypoint[0] != LauncherPath {
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
	return DefaultOutputTarget
}

// checkOutputMount reads, from outside, the mounts of role's container
// once it started: each writable path must be noexec in the container.
// A daemon in another mount namespace than the harness would have bound
// the plain directory; the run stops then. A container already gone is
// not judged here (the launcher checks for itself before a workload
// runs).
func (j *job) checkOutputMount(role string) error {
	if j.noexec == nil || j.noexec.accepted || j.volumes != nil {
		return nil // a volume's options were read back when it was made (checkVolume)
	}
	c := j.sess.Find(role)
	if c == nil || c.Pid <= 0 || errors.Is(c.ProcessErr, dockerx.ErrProcessGone) {
		return nil
	}
	if c.Process == nil {
		return exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("the %s container's output directory could not be checked for noexec: %w", role, c.ProcessErr),
			"the host reads a container's mounts only from a process proven to be on this host: run mcpsidecar on the engine's host, "+
				"reaching it by its local unix socket, or accept the risk with "+EnvAllowExecOutput+"=1")
	}
	for _, target := range j.noexec.targets[role] {
		err := seenNoexec(c.Process, target)
		if errors.Is(err, dockerx.ErrProcessGone) {
			continue
		}
		if err != nil {
			return exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("the %s container's output directory is not noexec: %w", role, err),
				"the Docker daemon does not see this harness's mounts (another mount namespace: rootless, snap or Desktop Docker); "+
					"run the harness in the daemon's mount namespace, or accept it with "+EnvAllowExecOutput+"=1")
		}
	}
	return nil
}

// unmountOutputs releases every mount mountOutputs made, on every path
// (--keep too: the files stay, a kept container keeps its own copy of
// the mount). One that cannot be removed is left to `mcpsidecar gc`.
func (j *job) unmountOutputs() {
	if j.noexec == nil {
		return
	}
	var failed []string
	for _, release := range j.noexec.release {
		if err := release(); err != nil {
			failed = append(failed, err.Error())
		}
	}
	j.noexec.release = nil
	if len(failed) > 0 {
		d := "output directory mounts left behind (mcpsidecar gc removes them): " + strings.Join(failed, "; ")
		j.meta.Degradations = append(j.meta.Degradations, d)
		fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	}
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
