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
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx/dockerxtest"
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

// TestWriteGrow: the live copy grows by what the source gained, in place
// (same file), and starts over when the source is shorter.
func TestWriteGrow(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	write := func(s string) {
		t.Helper()
		if err := writeGrow(root, "log.jsonl", strings.NewReader(s), int64(len(s))); err != nil {
			t.Fatal(err)
		}
	}
	write("a\n")
	before, _ := os.Stat(filepath.Join(dir, "log.jsonl"))
	write("a\nb\n")
	after, _ := os.Stat(filepath.Join(dir, "log.jsonl"))
	if got, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(got) != "a\nb\n" || !os.SameFile(before, after) {
		t.Errorf("after growth: %q (same file %v)", got, os.SameFile(before, after))
	}
	write("x\n")
	if got, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(got) != "x\n" {
		t.Errorf("after a shorter source: %q", got)
	}
	write("y\nc\n") // the prefix changed: rewritten, not appended to
	last, _ := os.Stat(filepath.Join(dir, "log.jsonl"))
	if got, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(got) != "y\nc\n" || !os.SameFile(before, last) {
		t.Errorf("after a changed prefix: %q (same file %v)", got, os.SameFile(before, last))
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

// TestRemoveStale: after the final read, a live copy the read did not
// write (the role deleted the file, or swapped it for a FIFO, at the end)
// is removed and said; what the read wrote and what was never copied are
// left alone.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"answer.txt", "agent-turns.jsonl", "kept.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("early copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	problems := removeStale(root, []string{"answer.txt", "agent-turns.jsonl", "kept.json", "never.json"}, []string{"kept.json"})
	for _, n := range []string{"answer.txt", "agent-turns.jsonl"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the stale live copy is still there (%v)", n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "kept.json")); err != nil {
		t.Errorf("the file the read wrote is gone: %v", err)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "answer.txt") || !strings.Contains(problems[1], "live copy") {
		t.Errorf("problems %q, want one per removed copy", problems)
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

// TestMirrorBudget: the live copy of a role stops once it has read its
// budget through the holder (each tick reads the logs whole); without the
// budget it copies at every tick.
func TestMirrorBudget(t *testing.T) {
	reads := func(budget int64) int {
		defer func(b int64) { mirrorBudget = b }(mirrorBudget)
		mirrorBudget = budget
		f := dockerxtest.New()
		var mu sync.Mutex
		n := 0
		f.ExecFunc = func(id, user string, argv []string, stdout, stderr io.Writer) error {
			mu.Lock()
			n++
			mu.Unlock()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, runs.FileDecisions), []byte(strings.Repeat("x", 100)), 0o600); err != nil {
				return err
			}
			return holder.WriteOutput(stdout, dir, runs.RoleFiles[orchestrate.RoleGateway], runs.MaxCopyBytes, stderr)
		}
		dir, err := runs.Create(t.TempDir(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dir.MkdirOutput(orchestrate.RoleGateway, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
		holder, err := f.CreateContainer(context.Background(), dockerx.ContainerSpec{Name: "holder"})
		if err != nil || f.StartContainer(context.Background(), holder) != nil {
			t.Fatalf("the fake holder: %v", err)
		}
		var errb strings.Builder
		b := &backend{volumes: &outputVolumes{holder: holder, byRole: map[string]string{orchestrate.RoleGateway: "v"}, users: map[string]string{}}}
		say := func(format string, args ...any) { fmt.Fprintf(&errb, format+"\n", args...) }
		stop := b.mirror(context.Background(), f, dir.Path, []string{orchestrate.RoleGateway}, say)
		time.Sleep(2*mirrorEvery + mirrorEvery/2)
		stop()
		if budget < 100 && !strings.Contains(errb.String(), "live copy of the gateway logs stopped") {
			t.Errorf("budget %d: no note on stderr: %q", budget, errb.String())
		}
		mu.Lock()
		defer mu.Unlock()
		return n
	}
	if got := reads(10); got != 1 {
		t.Errorf("with a budget of 10 bytes the gateway's logs were read %d times, want once", got)
	}
	if got := reads(1 << 20); got < 3 {
		t.Errorf("within the budget the gateway's logs were read %d times in 2.5 ticks, want one per tick and the last", got)
	}
}
