package dockerbackend

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// On the engine-only path nothing is bound from this host: the engine
// would resolve the path on its own host, where it names nothing (the
// engine then creates a root-owned folder there) or another file (red
// team: a program planted at that path ran as the launcher, forged the
// hardening report and passed every check). The launcher a user's
// workload runs under (run --image) comes from our image instead: the
// holder copies its own binary into a volume of its own (copy-self), the
// host checks the copy's digest against the binary it built the image
// from, and the workload's container mounts the volume read-only at the
// launcher's folder. Any other read-only bind of a host path is refused
// when the engine is not on this host.

// launcherHolderDir is where the holder mounts the launcher volume.
const launcherHolderDir = "/launcher"

// launcherVolumeOpts: a tmpfs the launcher can run from (no noexec), with
// nothing set-id and no device, a few inodes, readable by every user.
const launcherVolumeOpts = "size=268435456,nr_inodes=16,nosuid,nodev,mode=0755"

// readOnlyMount is what a read-only mount of the plan becomes on the
// engine-only path: the launcher's bind the launcher volume, another bind
// of a host path itself on a local engine, or a refusal.
func (b *backend) readOnlyMount(ctx context.Context, ov *outputVolumes, st *orchestrate.Step, m dockerx.Mount) (dockerx.Mount, error) {
	if m.Target == sandbox.LauncherPath {
		if err := b.makeLauncherVolume(ctx, ov, st); err != nil {
			return m, err
		}
		return dockerx.Mount{Source: ov.launcher, Target: path.Dir(sandbox.LauncherPath), ReadOnly: true}, nil
	}
	if b.r.Metadata().Engine.Local {
		return m, nil
	}
	return m, exitcode.WithHint(exitcode.Unavailable,
		fmt.Errorf("the %s container binds %s from this host at %s, but %v (%s): the engine would bind a path of its own host",
			st.Role, m.Source, m.Target, dockerx.ErrNotOnThisHost, b.r.Metadata().Engine.Locality),
		"run mcpsidecar on the engine's host, reaching it by its local unix socket; for Squid, use the built-in gateway (--gateway-engine ours)")
}

// makeLauncherVolume creates the run's launcher volume, once, owned by
// the holder's user, and checks what the engine holds for it.
func (b *backend) makeLauncherVolume(ctx context.Context, ov *outputVolumes, st *orchestrate.Step) error {
	if ov.launcher != "" {
		return nil
	}
	uid, gid, err := numericUser(spec.User)
	if err != nil {
		return err
	}
	name := st.Spec.Name + "-launcher"
	v := dockerx.VolumeSpec{Name: name, Labels: maps.Clone(st.Spec.Labels), DriverOpts: map[string]string{
		"type": "tmpfs", "device": "tmpfs", "o": fmt.Sprintf("%s,uid=%d,gid=%d", launcherVolumeOpts, uid, gid)}}
	if err := b.r.Engine().CreateVolume(ctx, v); err != nil {
		return err
	}
	ov.created = append(ov.created, name)
	driver, opts, _, err := b.r.Engine().VolumeOptions(ctx, name)
	if err != nil {
		return err
	}
	flags := strings.Split(opts["o"], ",")
	if driver != "local" || opts["type"] != "tmpfs" || !slices.Contains(flags, "nosuid") || !slices.Contains(flags, "nodev") {
		return fmt.Errorf("volume %s: the engine holds driver %q, type %q, options %q, not the local driver's tmpfs with nosuid and nodev", name, driver, opts["type"], opts["o"])
	}
	ov.launcher = name
	return nil
}

// fillLauncher has the holder copy our binary into the launcher volume
// and checks the copy is the binary our image was built from.
func (b *backend) fillLauncher(ctx context.Context) error {
	ov := b.volumes
	if ov.launcher == "" {
		return nil
	}
	var out, errb bytes.Buffer
	argv := []string{holder.ImageBinary, inside.CopySelfCommand, "--to", path.Join(launcherHolderDir, path.Base(sandbox.LauncherPath))}
	if err := b.r.Engine().Exec(ctx, ov.holder, spec.User, argv, &out, &errb); err != nil {
		return fmt.Errorf("copying the launcher into its volume: %w (%s)", err, strings.TrimSpace(errb.String()))
	}
	want := b.imageBinaryDigest()
	if got := strings.TrimSpace(out.String()); got != want {
		return fmt.Errorf("the launcher copied into its volume has digest %q, not that of the binary our image was built from (%s)", got, want)
	}
	return nil
}

// imageBinaryDigest is the SHA-256 of our binary in the image.
func (b *backend) imageBinaryDigest() string {
	for _, f := range b.r.ImageFiles().RootFS {
		if "/"+f.Name == holder.ImageBinary {
			sum := sha256.Sum256(f.Data)
			return hex.EncodeToString(sum[:])
		}
	}
	return "(no binary in the image)"
}
