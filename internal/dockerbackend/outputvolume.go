package dockerbackend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	"github.com/mcpsidecar/mcpsidecar/internal/hostoutput"
	"github.com/mcpsidecar/mcpsidecar/internal/livecopy"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Output through the engine (issue 29). Where the host cannot make the
// output directories noexec mounts of its own (not root; an engine that
// is not on this host, whose binds name paths on its own host), each
// role's output directory is a volume of the engine's local driver, a
// tmpfs mounted noexec,nosuid,nodev with a hard size and inode limit and
// owned by the role's user; a holder container of our image keeps every
// volume mounted (a tmpfs volume's content goes when no container uses
// it) until the record is read through the API: an exec of the same safe
// reader the Kubernetes backend uses (holder.ReadArgs), whose tar the host
// accepts only as the named regular files (untarOutput), into a run
// directory owned by the user who ran it. The host needs no privilege
// and no path in common with the engine.

// EnvOutput chooses where the roles' output goes: "volume" (engine
// volumes, read through the API) or "bind" (host directories the host
// makes noexec: root, local engine). Unset: bind where the host can make
// it noexec, volume otherwise.
const EnvOutput = "MCPSIDECAR_OUTPUT"

// outputVolumeOpts are the tmpfs mount options of every output volume,
// before its owner: the size is the output cap (runs.MaxOutputBytes) and
// the inodes the entry cap, now enforced by the kernel (ENOSPC).
var outputVolumeOpts = fmt.Sprintf("size=%d,nr_inodes=%d,noexec,nosuid,nodev,mode=0700", runs.MaxOutputBytes, runs.MaxOutputEntries+16)

// holderMount is where the holder mounts a role's volume.
func holderMount(role string) string { return "/out/" + role }

// outputVolumes is what useOutputVolumes made: per role, its volume and
// the user that owns it; the holder container.
type outputVolumes struct {
	launcher   string            // the launcher volume, when a user's workload runs (launcher.go)
	byRole     map[string]string // role -> volume name
	users      map[string]string // role -> "uid:gid"
	created    []string          // volumes, in creation order
	holder     string            // holder container id, once created
	holderName string
}

// wantVolumes reports whether the output goes to engine volumes, as
// EnvOutput says or, unset, because the host cannot make a bind noexec
// here: an engine that is not on this host, a rootless engine (its mounts
// are in rootlesskit's namespace), or a host process without CAP_SYS_ADMIN.
func (b *backend) wantVolumes() (bool, error) {
	switch v := b.r.Getenv(EnvOutput); v {
	case "volume":
		return true, nil
	case "bind":
		return false, nil
	case "":
		return !b.r.Metadata().Engine.Local || os.Geteuid() != 0 || b.r.Metadata().Engine.Rootless, nil
	default:
		return false, exitcode.WithHint(exitcode.Usage, fmt.Errorf("%s=%q: not an output mode", EnvOutput, v),
			"use volume (engine volumes, read through the API) or bind (host directories, root and a local engine only), or leave it unset")
	}
}

// useOutputVolumes turns every writable output mount of the plan into a
// volume of its own, creates the volumes and starts the holder.
func (b *backend) useOutputVolumes(ctx context.Context, plan *orchestrate.Plan) error {
	ov := &outputVolumes{byRole: map[string]string{}, users: map[string]string{}}
	b.volumes = ov
	var holderMounts []dockerx.Mount
	for i := range plan.Containers {
		st := &plan.Containers[i]
		for k, m := range st.Spec.Mounts {
			if m.ReadOnly {
				mnt, err := b.readOnlyMount(ctx, ov, st, m)
				if err != nil {
					return err
				}
				if mnt.Source != m.Source {
					st.Spec.Mounts[k] = mnt
					holderMounts = append(holderMounts, dockerx.Mount{Source: mnt.Source, Target: launcherHolderDir})
				}
				continue
			}
			if m.Source != st.OutputDir {
				return fmt.Errorf("the %s container's writable mount %s is not its output directory: it cannot be made a volume", st.Role, m.Source)
			}
			uid, gid, err := numericUser(st.Spec.User)
			if err != nil {
				return fmt.Errorf("the %s container's output volume: %w", st.Role, err)
			}
			name := st.Spec.Name + "-out"
			v := dockerx.VolumeSpec{Name: name, Labels: maps.Clone(st.Spec.Labels), DriverOpts: map[string]string{
				"type": "tmpfs", "device": "tmpfs", "o": fmt.Sprintf("%s,uid=%d,gid=%d", outputVolumeOpts, uid, gid)}}
			if err := b.r.Engine().CreateVolume(ctx, v); err != nil {
				return err
			}
			ov.created = append(ov.created, name)
			if err := checkVolume(ctx, b.r.Engine(), name); err != nil {
				return err
			}
			st.Spec.Mounts[k].Source = name
			ov.byRole[st.Role] = name
			ov.users[st.Role] = fmt.Sprintf("%d:%d", uid, gid)
			holderMounts = append(holderMounts, dockerx.Mount{Source: name, Target: holderMount(st.Role)})
		}
	}
	hostoutput.SetExecAccepted(plan, "")
	if err := b.startHolder(ctx, plan, holderMounts); err != nil {
		return err
	}
	return b.fillLauncher(ctx)
}

// numericUser parses a container user "uid:gid".
func numericUser(u string) (int, int, error) {
	us, gs, ok := strings.Cut(u, ":")
	uid, uerr := strconv.Atoi(us)
	gid, gerr := strconv.Atoi(gs)
	if !ok || uerr != nil || gerr != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("the container's user %q is not a numeric uid:gid, which the volume's owner must be", u)
	}
	return uid, gid, nil
}

// checkVolume reads back what the engine holds for a volume: the local
// driver, a tmpfs, noexec, nosuid and nodev. An engine that dropped an
// option would mount a volume a workload could map code from.
func checkVolume(ctx context.Context, e dockerx.Engine, name string) error {
	driver, opts, _, err := e.VolumeOptions(ctx, name)
	if err != nil {
		return err
	}
	flags := strings.Split(opts["o"], ",")
	if driver != "local" || opts["type"] != "tmpfs" {
		return fmt.Errorf("volume %s: the engine holds driver %q, type %q, not the local driver's tmpfs", name, driver, opts["type"])
	}
	for _, f := range []string{"noexec", "nosuid", "nodev"} {
		if !slices.Contains(flags, f) {
			return fmt.Errorf("volume %s: the engine holds mount options %q, without %s", name, opts["o"], f)
		}
	}
	return nil
}

// startHolder creates and starts the holder: our image's hold command,
// no network, no capability, every output volume mounted, so their
// content stays until it is read (readOutputVolumes) and the host can
// release a held role through it.
func (b *backend) startHolder(ctx context.Context, plan *orchestrate.Plan, mounts []dockerx.Mount) error {
	if len(plan.Containers) == 0 || len(mounts) == 0 {
		return nil
	}
	first := plan.Containers[0].Spec
	labels := maps.Clone(first.Labels)
	labels[orchestrate.LabelRole] = "holder"
	spec := dockerx.ContainerSpec{
		// Our image, never a role's: the first role may be the user's
		// workload image (run --image), whose own entrypoint would then
		// hold the record and answer the host's reads.
		Name: strings.TrimSuffix(first.Name, "-"+plan.Containers[0].Role) + "-holder", Image: b.r.ImageTag(),
		Cmd: []string{holder.HoldCommand}, User: spec.User, Labels: labels,
		Networks: []dockerx.Attachment{{Network: "none"}}, ReadOnlyRootfs: true,
		CapDrop: []string{"ALL"}, CapAdd: []string{}, NoNewPrivileges: first.NoNewPrivileges, Seccomp: first.Seccomp,
		Mounts: mounts, PidsLimit: 32, MemoryBytes: b.holderMemory(), MemorySwapBytes: b.holderMemory(), NanoCPUs: 500_000_000,
		DNS: []string{}, DNSOptions: []string{}, ExtraHosts: []string{}, StopTimeout: time.Second,
	}
	b.volumes.holderName = spec.Name
	id, err := b.r.Engine().CreateContainer(ctx, spec)
	if err != nil {
		return fmt.Errorf("creating the output holder: %w", err)
	}
	b.volumes.holder = id
	if err := b.r.Engine().StartContainer(ctx, id); err != nil {
		return fmt.Errorf("starting the output holder: %w", err)
	}
	return nil
}

// holderMemory bounds the holder: 64 MiB, and the launcher's copy when
// it makes one (a tmpfs's pages count against the cgroup that wrote
// them: the copy of a 60 MB binary was killed at 64 MiB).
func (b *backend) holderMemory() int64 {
	const base = 64 << 20
	if b.volumes == nil || b.volumes.launcher == "" {
		return base
	}
	for _, f := range b.r.ImageFiles().RootFS {
		if "/"+f.Name == holder.ImageBinary {
			return base + int64(len(f.Data))
		}
	}
	return base
}

// releaseHeld creates a held role's release file in its volume, through
// the holder, as the role's user (the volume is the role's alone).
func (b *backend) releaseHeld(ctx context.Context, role string) error {
	if b.volumes.byRole[role] == "" {
		return fmt.Errorf("releasing %s: it has no output volume", role)
	}
	argv := []string{holder.ImageBinary, hold.ReleaseCommand, "--file", hold.Path(holderMount(role)), "--token", b.r.HoldToken()}
	var errb bytes.Buffer
	if err := b.r.Engine().Exec(ctx, b.volumes.holder, b.volumes.users[role], argv, io.Discard, &errb); err != nil {
		return fmt.Errorf("releasing %s through the output holder: %w: %s", role, err, strings.TrimSpace(errb.String()))
	}
	return nil
}

// volumeReadTimeout bounds one role's final read: a few files of at most
// holder.OutputCap each, streamed through the API.
const volumeReadTimeout = time.Minute

// readOutputVolumes reads every role's files from its volume into its
// output directory of the run directory; what was refused or failed is
// an artifact problem.
func (b *backend) readOutputVolumes(ctx context.Context) {
	if b.volumes == nil || b.volumes.holder == "" {
		return
	}
	for _, st := range b.r.Session().Plan.Containers {
		if b.volumes.byRole[st.Role] == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, volumeReadTimeout)
		problems, err := b.readOutputVolume(rctx, st.Role)
		cancel()
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, p := range problems {
			msg := fmt.Sprintf("%s output: %s", st.Role, p)
			b.r.ArtifactProblem(msg)
		}
	}
}

// readOutputVolume streams the reader's tar from the holder into the
// role's output directory, over what the mirror copied there while the
// run went.
func (b *backend) readOutputVolume(ctx context.Context, role string) ([]string, error) {
	dst, err := os.OpenRoot(filepath.Join(b.r.Dir(), role))
	if err != nil {
		return nil, fmt.Errorf("%s output directory: %w", role, err)
	}
	defer dst.Close()
	names := holder.OutputNames(role)
	argv := holder.ReadArgs(holderMount(role), holder.OutputCap, names)
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := b.r.Engine().Exec(ctx, b.volumes.holder, b.volumes.users[role], argv, pw, &errb)
		pw.CloseWithError(err)
		done <- err
	}()
	written, untarErr := holder.UntarWith(pr, dst, names, holder.OutputCap, livecopy.WriteGrow) // over the live copies, in place
	pr.CloseWithError(errors.New("stopped reading"))
	err = <-done
	problems := append(b.readerNotes(role, errb.String()), livecopy.RemoveStale(dst, names, written)...)
	if err != nil {
		return problems, fmt.Errorf("reading the %s output volume: %w", role, err)
	}
	return problems, untarErr
}

// readerNotes splits the reader's stderr: the files it left out and why
// (holder.ReadProblem lines, returned) and its other notes (printed).
func (b *backend) readerNotes(role, stderr string) []string {
	var problems []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if r, ok := strings.CutPrefix(l, holder.ReadProblem); ok {
			problems = append(problems, r)
		} else if l != "" {
			b.r.Say("%s output reader: %s", role, l)
		}
	}
	return problems
}

// removeOutputVolumes removes the holder, then the volumes (a volume in
// use cannot be removed). --keep leaves them, with the containers.
func (b *backend) removeOutputVolumes(ctx context.Context) error {
	if b.volumes == nil {
		return nil
	}
	var errs []error
	if b.volumes.holder != "" {
		errs = append(errs, b.r.Engine().RemoveContainer(ctx, b.volumes.holder))
	}
	for _, v := range b.volumes.created {
		errs = append(errs, b.r.Engine().RemoveVolume(ctx, v))
	}
	return errors.Join(errs...)
}

// startMirror copies each role's logs from its volume into its output
// directory of the run directory while the run goes, and once more at the
// stop (internal/livecopy), through the holder's reader. collect reads
// every file again, and writes it over them (readOutputVolume).
func (b *backend) startMirror(ctx context.Context) (stop func()) {
	var roles []string
	for _, st := range b.r.Session().Plan.Containers {
		if b.volumes.byRole[st.Role] != "" {
			roles = append(roles, st.Role)
		}
	}
	stopCopy := livecopy.Start(ctx, b.r.Dir(), roles, b.volumeSource(b.r.Engine()), b.r.Say)
	return func() { stopCopy(true) }
}

// volumeSource reads a role's files from its volume through the holder.
func (b *backend) volumeSource(e dockerx.Engine) livecopy.Source {
	return func(ctx context.Context, role string, names []string, w io.Writer) error {
		return e.Exec(ctx, b.volumes.holder, b.volumes.users[role], holder.ReadArgs(holderMount(role), holder.OutputCap, names), w, io.Discard)
	}
}

// removeCommand adds the holder and the output volumes to a kept run's
// remove command (sh -c "..."): the holder with the containers, the
// volumes last, once nothing uses them.
func (ov *outputVolumes) removeCommand(cmd []string) []string {
	if ov == nil || len(cmd) != 3 {
		return cmd
	}
	var parts []string
	if ov.holder != "" {
		parts = append(parts, "docker rm --force "+ov.holderName)
	}
	if cmd[2] != "" {
		parts = append(parts, cmd[2])
	}
	if len(ov.created) > 0 {
		parts = append(parts, "docker volume rm "+strings.Join(ov.created, " "))
	}
	return []string{cmd[0], cmd[1], strings.Join(parts, " && ")}
}
