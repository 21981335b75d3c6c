package dockerbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// volumeRig is a rig whose output goes through the engine: the fake's
// execs in the holder read and write the directories standing in for the
// volumes, and its helpers answer as ours do.
func volumeRig(t *testing.T) *rig {
	r := newRig(t, orchestrate.WorkloadCheck)
	setEnv(r, EnvOutput, "volume")
	var mu sync.Mutex
	holderMounts := map[string]string{} // holder path -> volume
	prevCreate := r.f.OnCreate
	r.f.OnCreate = func(c dockerx.ContainerSpec) {
		prevCreate(c)
		switch role := c.Labels[orchestrate.LabelRole]; {
		case role == "holder":
			mu.Lock()
			for _, m := range c.Mounts {
				holderMounts[m.Target] = m.Source
			}
			mu.Unlock()
		case strings.HasSuffix(role, "-observe"), strings.HasSuffix(role, "-route"), strings.HasSuffix(role, "-ready"), strings.HasSuffix(role, "-bridge"):
			r.f.ExitOnStart["id-"+c.Name] = 0
		}
	}
	r.f.LogsFunc = func(id string, stdout, stderr io.Writer) {
		switch {
		case strings.HasSuffix(id, "-bridge"):
			fmt.Fprintln(stdout, "unheld")
		case strings.HasSuffix(id, "-observe"):
			fmt.Fprintln(stdout, `{"seccomp":2,"seccomp_filters":2,"no_new_privs":true,"cap_eff":0,"cap_prm":0,"uid":65532}`)
		}
	}
	r.f.ExecFunc = func(id, user string, argv []string, stdout, stderr io.Writer) error {
		if !strings.HasSuffix(id, "-holder") || len(argv) < 2 || argv[0] != holder.ImageBinary {
			return fmt.Errorf("exec %v in %s: not the holder's reader or release", argv, id)
		}
		volumeOf := func(dir string) string {
			mu.Lock()
			defer mu.Unlock()
			return r.volumeDir(holderMounts[dir])
		}
		switch argv[1] {
		case holder.ReadCommand: // --dir D --max N -- names...
			return holder.WriteOutput(stdout, volumeOf(argv[3]), argv[7:], runs.MaxCopyBytes, stderr)
		case hold.ReleaseCommand: // --file P
			return os.WriteFile(filepath.Join(volumeOf(filepath.Dir(argv[3])), hold.File), nil, 0o600)
		}
		return fmt.Errorf("exec %v: unknown command", argv)
	}
	return r
}

// TestLifecycleVolumeOutput: an engine that is not on this host, older
// than 26: each role's output is a tmpfs volume made noexec with hard
// limits, kept by a holder; the held roles are released through it; the
// default route is removed and each role observed by helpers that join
// only its namespace; the record is read through the holder; teardown
// removes holder and volumes. Nothing of this host is used: no proof, no
// dial, no route dropped here.
func TestLifecycleVolumeOutput(t *testing.T) {
	r := volumeRig(t)
	r.f.VersionString, r.o.AllowOldEngine, r.f.NotLocal = "20.10.24", true, remote
	res, err := r.run(context.Background())
	if err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v\nstderr:\n%s", err, r.errb.String())
	}
	// The fake roles write only their harden reports (the record checks
	// of the logs a real role writes fail here); those and what the
	// helpers saw must pass.
	for _, c := range res.Metadata.Verdict.Checks {
		if strings.Contains(c.Name, "hardening") || c.Name == "agent --check exited 0" || c.Name == "no route out" ||
			strings.HasPrefix(c.Name, "engine's host has no address on") {
			if !c.OK {
				t.Errorf("check %q failed: %s", c.Name, c.Detail)
			}
		}
	}
	if strings.Contains(r.errb.String(), "keeps the default route") {
		t.Errorf("a route helper failed:\n%s", r.errb.String())
	}
	if len(r.f.Proven) != 0 || len(r.f.Dials) != 0 || len(r.f.Dropped) != 0 {
		t.Errorf("proven %q, dials %q, routes dropped %q: want none", r.f.Proven, r.f.Dials, r.f.Dropped)
	}
	calls := r.f.CallList()
	var volumes []string
	for _, c := range calls {
		if v, ok := strings.CutPrefix(c, "create-volume "); ok {
			volumes = append(volumes, v)
		}
	}
	if len(volumes) != 3 {
		t.Fatalf("volumes created %v, want one per role", volumes)
	}
	// Each volume made before any role's container, and removed at the end.
	firstRole := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "create egress-gateway") })
	for _, v := range volumes {
		i := slices.Index(calls, "create-volume "+v)
		if i > firstRole {
			t.Errorf("volume %s created after the first role's container", v)
		}
		if !slices.Contains(calls, "remove-volume "+v) {
			t.Errorf("volume %s not removed", v)
		}
	}
	if len(r.f.Volumes) != 0 {
		t.Errorf("volumes left: %v", r.f.Volumes)
	}
	if !slices.ContainsFunc(res.Metadata.Verdict.Checks, func(c runs.Check) bool { return strings.HasPrefix(c.Name, "engine's host has no address on") }) {
		t.Error("no bridge check through a helper")
	}
	for _, want := range []string{"-holder", "-agent-run", "-route", "-observe", "-ready", "-bridge"} {
		if !slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "create ") && strings.Contains(c, want) }) {
			t.Errorf("no container created matching %q: %v", want, calls)
		}
	}
	for _, role := range []string{orchestrate.RoleGateway, orchestrate.RoleSidecar, orchestrate.RoleAgent} {
		if o := res.Metadata.Observed[role]; !o.Seen || o.Seccomp != 2 {
			t.Errorf("%s observed %+v, want seen through the helper", role, o)
		}
		if _, err := os.Stat(filepath.Join(res.RunDir, runs.CollectedHardenReport(role))); err != nil {
			t.Errorf("%s's harden report not read through the holder: %v", role, err)
		}
	}
	for name, v := range r.f.Specs {
		if !strings.HasSuffix(name, "-out") {
			continue
		}
		t.Errorf("a container named like a volume: %s %v", name, v)
	}
}

// TestOutputVolumeOptions: the options every volume is made with, and
// the read-back that refuses a volume the engine holds without noexec.
func TestOutputVolumeOptions(t *testing.T) {
	for _, f := range []string{"noexec", "nosuid", "nodev", "size=268435456", "nr_inodes=", "mode=0700"} {
		if !strings.Contains(outputVolumeOpts, f) {
			t.Errorf("volume options %q lack %s", outputVolumeOpts, f)
		}
	}
	r := volumeRig(t)
	ctx := context.Background()
	if err := r.f.CreateVolume(ctx, dockerx.VolumeSpec{Name: "v", DriverOpts: map[string]string{"type": "tmpfs", "o": "size=1m,nosuid,nodev"}}); err != nil {
		t.Fatal(err)
	}
	if err := checkVolume(ctx, r.f, "v"); err == nil || !strings.Contains(err.Error(), "without noexec") {
		t.Errorf("checkVolume = %v, want a refusal naming noexec", err)
	}
	if _, _, err := numericUser("node"); err == nil {
		t.Error(`numericUser("node") passed`)
	}
}

// TestVolumeOutputFailureLeavesNothing: a failure while the output
// volumes and their holder are made (a volume the engine refuses, the
// holder not created or not started) fails the run-dir phase and removes
// every volume and container made before it: the run's teardown runs
// although no role was created.
func TestVolumeOutputFailureLeavesNothing(t *testing.T) {
	refused := errors.New("refused by the test")
	for _, fail := range []string{"second volume", "holder create", "holder start"} {
		t.Run(fail, func(t *testing.T) {
			r := volumeRig(t)
			volumes := 0
			r.f.FailOn = func(call string) error {
				if fail == "second volume" && strings.HasPrefix(call, "create-volume ") {
					if volumes++; volumes == 2 {
						return refused
					}
				}
				return nil
			}
			if fail == "holder create" {
				r.f.FailOn = func(call string) error {
					if strings.HasPrefix(call, "create ") && strings.HasSuffix(call, "-holder") {
						return refused
					}
					return nil
				}
			}
			if fail == "holder start" {
				r.f.StartErr = map[string]error{}
				prev := r.f.OnCreate
				r.f.OnCreate = func(c dockerx.ContainerSpec) {
					prev(c)
					if c.Labels[orchestrate.LabelRole] == "holder" {
						r.f.StartErr["id-"+c.Name] = refused
					}
				}
			}
			res, err := r.run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "refused by the test") {
				t.Fatalf("run: %v, want the engine's refusal", err)
			}
			var phases []string
			for _, p := range res.Metadata.Phases {
				phases = append(phases, p.Name)
			}
			if !slices.Contains(phases, "teardown") {
				t.Errorf("phases %v: no teardown after the failure", phases)
			}
			if len(r.f.Volumes) != 0 {
				t.Errorf("volumes left: %v", r.f.Volumes)
			}
			assertAllRemoved(t, r.f)
		})
	}
}

// TestHolderRunsOurImage: the holder is our image even when the first
// role's container runs another (a user's workload image, when the agent
// is the only role): that image's entrypoint would hold the record and
// answer the host's reads (red team, finding 1).
func TestHolderRunsOurImage(t *testing.T) {
	r := volumeRig(t)
	r.o.Plan = func(p *orchestrate.Plan) error {
		p.Containers[0].Spec.Image = "user/evil:1"
		return nil
	}
	var holderImage, ours string
	prev := r.f.OnCreate
	r.f.OnCreate = func(c dockerx.ContainerSpec) {
		prev(c)
		if c.Labels[orchestrate.LabelRole] == "holder" {
			holderImage = c.Image
		}
	}
	res, _ := r.run(context.Background())
	ours = res.Metadata.Image.Tag
	if ours == "" || holderImage != ours {
		t.Errorf("holder image %q, want ours %q", holderImage, ours)
	}
}

// TestVolumeOutputKeep: a kept run on the engine-only path keeps its
// holder and volumes, and the remove command it prints names them, the
// volumes last (red team: the command left them, and gc keeps kept runs).
func TestVolumeOutputKeep(t *testing.T) {
	r := volumeRig(t)
	r.o.Keep = true
	res, err := r.run(context.Background())
	if err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v", err)
	}
	if len(r.f.Volumes) != 3 {
		t.Errorf("volumes after --keep: %d, want the 3 kept", len(r.f.Volumes))
	}
	cmd := res.Metadata.RemoveCommand
	if len(cmd) != 3 {
		t.Fatalf("remove command %q", cmd)
	}
	holder := strings.Index(cmd[2], "-holder")
	volumes := strings.Index(cmd[2], "docker volume rm ")
	if holder < 0 || volumes < 0 || volumes < strings.Index(cmd[2], "docker rm --force") {
		t.Errorf("remove command %q: want the holder, the containers, then the volumes", cmd[2])
	}
	for v := range r.f.Volumes {
		if !strings.Contains(cmd[2][volumes:], v) {
			t.Errorf("remove command %q does not name volume %s", cmd[2], v)
		}
	}
}
