package dockerbackend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// launcherRig is a volume rig running a user's workload image, whose
// holder answers copy-self with digest (the real one when "").
func launcherRig(t *testing.T, digest string) (*rig, *[]dockerx.ContainerSpec) {
	r := volumeRig(t)
	r.o.Command, r.o.Workload = "run", orchestrate.WorkloadAgent
	setEnv(r, "OPENAI_API_KEY", "sk-test-workload")
	r.f.Images["team/agent:1"] = true
	r.o.Own = &sandbox.OwnWorkload{Image: "team/agent:1", Command: []string{"python3", "/app/agent.py"}, Pull: sandbox.PullNever}
	bin, err := os.ReadFile(r.o.Getenv(sandbox.EnvImageBinary))
	if err != nil {
		t.Fatal(err)
	}
	if digest == "" {
		sum := sha256.Sum256(bin)
		digest = hex.EncodeToString(sum[:])
	}
	prevExec := r.f.ExecFunc
	r.f.ExecFunc = func(id, user string, argv []string, stdout, stderr io.Writer) error {
		if len(argv) > 1 && argv[1] == inside.CopySelfCommand {
			r.f.Record("copy-self %s", strings.Join(argv[2:], " "))
			fmt.Fprintln(stdout, digest)
			return nil
		}
		return prevExec(id, user, argv, stdout, stderr)
	}
	var created []dockerx.ContainerSpec
	prev := r.f.OnCreate
	r.f.OnCreate = func(c dockerx.ContainerSpec) {
		prev(c)
		created = append(created, c)
	}
	return r, &created
}

// TestLauncherVolume: on the engine-only path a user's workload runs the
// launcher from a volume our holder filled with our binary, checked by
// its digest, mounted read-only; nothing is bound from this host, and the
// volume goes at teardown.
func TestLauncherVolume(t *testing.T) {
	r, created := launcherRig(t, "")
	r.run(context.Background())
	bin := r.o.Getenv(sandbox.EnvImageBinary)
	var agent, holder *dockerx.ContainerSpec
	for i, c := range *created {
		switch c.Labels[orchestrate.LabelRole] {
		case orchestrate.RoleAgent:
			agent = &(*created)[i]
		case "holder":
			holder = &(*created)[i]
		}
	}
	if agent == nil || holder == nil {
		t.Fatalf("agent %v, holder %v created; calls %v", agent != nil, holder != nil, r.f.CallList())
	}
	var launcherVol string
	for _, m := range agent.Mounts {
		if m.Source == bin {
			t.Errorf("the launcher is bound from this host: %+v", m)
		}
		if m.Target == "/.mcpsidecar" && m.ReadOnly && strings.HasSuffix(m.Source, "-launcher") {
			launcherVol = m.Source
		}
	}
	if launcherVol == "" {
		t.Fatalf("no launcher volume mounted read-only in the workload's container: %+v", agent.Mounts)
	}
	if !slices.Contains(holder.Mounts, dockerx.Mount{Source: launcherVol, Target: launcherHolderDir}) {
		t.Errorf("the holder does not mount the launcher volume: %+v", holder.Mounts)
	}
	calls := r.f.CallList()
	cp := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "copy-self --to /launcher/mcpsidecar") })
	ag := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "create ") && strings.Contains(c, "agent") })
	if cp < 0 || ag < 0 || cp > ag {
		t.Errorf("copy-self at %d, agent created at %d: want the copy first\n%v", cp, ag, calls)
	}
	if !slices.Contains(calls, "remove-volume "+launcherVol) {
		t.Errorf("the launcher volume %s was not removed", launcherVol)
	}
}

// TestLauncherVolumeDigest: a copy whose digest is not our binary's stops
// the run before the workload's container exists.
func TestLauncherVolumeDigest(t *testing.T) {
	r, created := launcherRig(t, strings.Repeat("0", 64))
	_, err := r.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not that of the binary our image was built from") {
		t.Fatalf("run: %v, want the digest refused", err)
	}
	for _, c := range *created {
		if c.Labels[orchestrate.LabelRole] == orchestrate.RoleAgent {
			t.Error("the workload's container was created with a launcher of unknown digest")
		}
	}
	assertAllRemoved(t, r.f)
}

// TestHostBindRefusedElsewhere: a read-only bind of a host path (here a
// fixture, as Squid's squid.conf is) on an engine that is not on this
// host is refused, naming the mount, before any role is created.
func TestHostBindRefusedElsewhere(t *testing.T) {
	r := volumeRig(t)
	r.f.VersionString, r.f.NotLocal = "26.1.5", remote
	r.o.Plan = func(p *orchestrate.Plan) error {
		p.Containers[0].Spec.Mounts = append(p.Containers[0].Spec.Mounts, dockerx.Mount{Source: "/etc/squid.conf", Target: "/etc/squid/squid.conf", ReadOnly: true})
		return nil
	}
	_, err := r.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "/etc/squid.conf") || !strings.Contains(err.Error(), "its own host") {
		t.Fatalf("run: %v, want the bind refused", err)
	}
	assertAllRemoved(t, r.f)
	if len(r.f.Volumes) != 0 {
		t.Errorf("volumes left: %v", r.f.Volumes)
	}
}
