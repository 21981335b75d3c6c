package dockerbackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hostoutput"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// Every writable path of every container is noexec (issue 16, probe
// G06 T12). The tmpfs mounts are by their options (internal/spec); the
// output directories are bind mounts, which Docker cannot mount noexec,
// so the host makes each one a noexec,nosuid,nodev mount of its own
// before any container starts (internal/hostoutput), checks from outside
// that each container sees it so, and unmounts it at the end of every
// run (teardown). Threat: a native library a workload writes there,
// mapped executable in-process (ctypes.CDLL, dlopen), out of reach of
// Landlock's execute right, which does not see mmap.

// mountNoexec and seenNoexec make and read the mounts; the backend's
// tests, whose containers exist only in a fake engine, replace them.
var (
	mountNoexec hostoutput.MountFunc = hostoutput.Noexec
	seenNoexec                       = func(p dockerx.Process, target string) error {
		mountinfo, err := p.Mountinfo()
		if err != nil {
			return err
		}
		return noexec.SeenIn(mountinfo, target)
	}
)

// mountOutputs gives each role of a Docker run its output place: an
// engine volume (outputvolume.go), or its directory of this run made
// noexec on this host, which only a local engine's containers see. A
// writable mount from anywhere else is refused rather than remounted.
func (b *backend) mountOutputs(ctx context.Context, plan *orchestrate.Plan) error {
	b.noexec = hostoutput.New(mountNoexec)
	if b.volumeMode {
		return b.useOutputVolumes(ctx, plan)
	}
	if m := b.r.Metadata().Engine; !m.Local {
		// The engine binds the paths on its own host, and its
		// containers' mounts cannot be read from here (no process of
		// theirs is on this host): nothing made here would hold there.
		err := fmt.Errorf("the output directories cannot be made noexec, nor checked, for an engine whose containers are not on this host: %w (%s)",
			dockerx.ErrNotOnThisHost, m.Locality)
		if b.r.Getenv(hostoutput.EnvAllowExecOutput) != "1" {
			return exitcode.WithHint(exitcode.Unavailable, err, "run mcpsidecar on the engine's host, reaching it by its local unix socket, or accept "+
				"output directories a workload can map code from with "+hostoutput.EnvAllowExecOutput+"=1")
		}
		return b.noexec.Accept(b.r, plan, err)
	}
	return b.noexec.Mount(b.r, plan)
}

// checkOutputMount reads, from outside, the mounts of role's container
// once it started: each writable path must be noexec in the container.
// A daemon in another mount namespace than the harness would have bound
// the plain directory; the run stops then. A container already gone is
// not judged here (the launcher checks for itself before a workload
// runs).
func (b *backend) checkOutputMount(role string) error {
	if b.noexec == nil || b.noexec.Accepted() || b.volumes != nil {
		return nil // a volume's options were read back when it was made (checkVolume)
	}
	c := b.r.Session().Find(role)
	if c == nil || c.Pid <= 0 || errors.Is(c.ProcessErr, dockerx.ErrProcessGone) {
		return nil
	}
	if c.Process == nil {
		return exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("the %s container's output directory could not be checked for noexec: %w", role, c.ProcessErr),
			"the host reads a container's mounts only from a process proven to be on this host: run mcpsidecar on the engine's host, "+
				"reaching it by its local unix socket, or accept the risk with "+hostoutput.EnvAllowExecOutput+"=1")
	}
	for _, target := range b.noexec.Targets(role) {
		err := seenNoexec(c.Process, target)
		if errors.Is(err, dockerx.ErrProcessGone) {
			continue
		}
		if err != nil {
			return exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("the %s container's output directory is not noexec: %w", role, err),
				"the Docker daemon does not see this harness's mounts (another mount namespace: rootless, snap or Desktop Docker); "+
					"run the harness in the daemon's mount namespace, or accept it with "+hostoutput.EnvAllowExecOutput+"=1")
		}
	}
	return nil
}
