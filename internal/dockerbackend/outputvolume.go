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
	written, untarErr := holder.UntarWith(pr, dst, names, holder.OutputCap, writeGrow) // over the live copies, in place
	pr.CloseWithError(errors.New("stopped reading"))
	err = <-done
	problems := append(b.readerNotes(role, errb.String()), removeStale(dst, names, written)...)
	if err != nil {
		return problems, fmt.Errorf("reading the %s output volume: %w", role, err)
	}
	return problems, untarErr
}

// removeStale removes each live copy the final read did not write: a file
// the role deleted, or made a link or a FIFO, at the end, or one the read
// stopped before. The record holds what the volume held at the end, or
// nothing; never an earlier copy (red team: a workload deleted its answer
// after the live copy was made, and the stale copy passed the verdict).
func removeStale(dst *os.Root, names, written []string) []string {
	var problems []string
	for _, name := range names {
		if slices.Contains(written, name) {
			continue
		}
		if _, err := dst.Lstat(name); err != nil {
			continue // never copied
		}
		if err := dst.Remove(name); err != nil {
			problems = append(problems, fmt.Sprintf("%s: not read at the end, and its live copy could not be removed: %v", name, err))
			continue
		}
		problems = append(problems, name+": not read from the volume at the end; the live copy made during the run is removed")
	}
	return problems
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

// mirrorEvery is how often the roles' logs are copied from their volumes
// into the run directory while the run goes.
const mirrorEvery = time.Second

// mirrorBudget bounds what the live copy reads of one role through the
// holder in a run: each tick reads the role's logs whole, so a role whose
// logs are large and rewritten (red team: four 60 MiB logs changed every
// 300 ms made the harness write 2 GB in 20 s) would have the host copy
// without end. Past it the role's live copy stops; the final read is
// whole and exact whatever the budget.
var mirrorBudget int64 = 512 << 20

// startMirror copies, every mirrorEvery until stopped (and once more at
// the stop), each role's logs
// (runs.RoleFiles) from its volume into its output directory of the run
// directory, through the holder's reader, each file grown by what it
// gained (writeGrow: the same file, appended to, as a role's own): so
// what reads the run directory while the run goes (run's progress lines,
// runs tail, the live export) sees the record as it grows, as with host
// directories. The copies are not the record: collect reads every file
// again, and writes it over them (readOutputVolume).
func (b *backend) startMirror(ctx context.Context) (stop func()) {
	var roles []string
	for _, st := range b.r.Session().Plan.Containers {
		roles = append(roles, st.Role)
	}
	return b.mirror(ctx, b.r.Engine(), b.r.Dir(), roles, b.r.Say)
}

// mirror is startMirror's work, over the engine e and the run directory
// dir, for roles; say prints a note.
func (b *backend) mirror(ctx context.Context, e dockerx.Engine, dir string, roles []string, say func(string, ...any)) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	copied := map[string]int64{} // bytes read through the holder, per role
	mirror := func(ctx context.Context) {
		for _, role := range roles {
			if b.volumes.byRole[role] == "" || len(runs.RoleFiles[role]) == 0 || copied[role] > mirrorBudget {
				continue
			}
			n, _ := b.mirrorRole(ctx, e, dir, role)
			if copied[role] += n; copied[role] > mirrorBudget {
				say("note: the live copy of the %s logs stopped after %d MiB (they churn); the record is read whole at the end", role, copied[role]>>20)
			}
		}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(mirrorEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			mirror(ctx)
		}
	}()
	return func() {
		cancel()
		<-done
		last, cancelLast := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelLast()
		mirror(last)
	}
}

// mirrorRole copies one role's logs and says how many bytes it read; a
// failure is left to the next tick and to collect.
func (b *backend) mirrorRole(ctx context.Context, e dockerx.Engine, dir, role string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dst, err := os.OpenRoot(filepath.Join(dir, role))
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	names := runs.RoleFiles[role]
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := e.Exec(ctx, b.volumes.holder, b.volumes.users[role], holder.ReadArgs(holderMount(role), holder.OutputCap, names), pw, io.Discard)
		pw.CloseWithError(err)
		done <- err
	}()
	cr := &countingReader{r: pr}
	_, err = holder.UntarWith(cr, dst, names, holder.OutputCap, writeGrow)
	pr.CloseWithError(errors.New("stopped reading"))
	return cr.n, errors.Join(<-done, err)
}

// writeGrow makes name in dst exactly the size bytes of r, in place: when
// the file already holds a prefix of them (the copy made a second ago of
// a log that only grows) only the rest is appended; otherwise it is
// rewritten from the start. The file stays the same file, so readers
// that follow it by offset and inode (run's progress lines, runs tail)
// see it grow. The run directory's role folders are written by the
// harness alone on this path: no container writes there.
func writeGrow(dst *os.Root, name string, r io.Reader, size int64) error {
	f, err := dst.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	have := min(fi.Size(), size)
	head := make([]byte, have)
	if _, err := io.ReadFull(r, head); err != nil {
		return err
	}
	old := make([]byte, have)
	if _, err := f.ReadAt(old, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if fi.Size() > size || !bytes.Equal(old, head) {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.WriteAt(head, 0); err != nil {
			return err
		}
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return err
	}
	_, err = io.CopyN(f, r, size-have)
	return err
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

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
