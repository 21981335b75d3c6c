//go:build docker

package e2e

// redteam2 finding 1: an image VOLUME under a writable path is a host-disk
// mount, writable and executable, that the noexec rule, the tmpfs bounds,
// the output cap and the record do not see. The harness refuses such an
// image before it creates anything; the launcher, checked here in a real
// container of the image, refuses to start a workload under any mount it
// can write through that is not noexec,nosuid,nodev.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// volumePaths are the image's VOLUMEs: below /tmp, /sandbox-work and the
// output directory, as e2e/redteam2/volume-exec declares them.
var volumePaths = []string{"/tmp/v", "/sandbox-work/v", "/sandbox-output/sub"}

// volumeImage is the Debian image with redteam2's attack.py at
// /app/attack.py and the three VOLUMEs (their directories owned by the
// workload's user, so it could write there); removed at the end.
func volumeImage(t *testing.T) string {
	t.Helper()
	base := debianImage(t)
	ctx := t.TempDir()
	attack, err := os.ReadFile(filepath.Join(repoRoot(t), "e2e", "redteam2", "volume-exec", "attack.py"))
	if err != nil {
		t.Fatal(err)
	}
	agWrite(t, filepath.Join(ctx, "attack.py"), string(attack))
	if err := os.Mkdir(filepath.Join(ctx, "vdir"), 0o777); err != nil {
		t.Fatal(err)
	}
	df := "FROM " + base + "\nCOPY attack.py /app/attack.py\n"
	for _, v := range volumePaths {
		df += "COPY --chown=65532:65532 vdir " + v + "\n"
	}
	quoted, _ := json.Marshal(volumePaths)
	df += "VOLUME " + string(quoted) + "\n"
	agWrite(t, filepath.Join(ctx, "Dockerfile"), df)
	image := "mcpsidecar-e2e-volume:" + RandHex(6)
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	docker(t, "build", "-q", "--label", TestLabel, "-t", image, ctx)
	if got := docker(t, "image", "inspect", "--format", "{{json .Config.Volumes}}", image); !strings.Contains(got, "/tmp/v") {
		t.Fatalf("the image declares no volume (%s): this test cannot tell the difference", got)
	}
	return image
}

// volumes lists the engine's volumes.
func volumes(t *testing.T) []string {
	t.Helper()
	return strings.Fields(docker(t, "volume", "ls", "-q"))
}

// newVolumes are the volumes in after that were not in before.
func newVolumes(before, after []string) []string {
	return slices.DeleteFunc(slices.Clone(after), func(v string) bool { return slices.Contains(before, v) })
}

// TestWorkloadVolumeRefused: run --image and test-sandbox --image refuse
// the image, exit 5, naming each volume and what to do, before any
// container, network, volume or mount exists; the attack never runs. Then
// the launcher itself, in a container of the image that the engine gave
// the three volumes, refuses to start the attack, naming each volume.
func TestWorkloadVolumeRefused(t *testing.T) {
	NeedDocker(t)
	image := volumeImage(t)
	id := RandHex(4)
	label := "mcpsidecar.e2e=" + id
	CleanupLabelled(t, label)
	runsDir := t.TempDir()
	before := volumes(t)
	want := "declares VOLUME " + strings.Join(slices.Sorted(slices.Values(volumePaths)), ", ")
	for _, args := range [][]string{
		{"run", "--allow-old-engine", "--runs-dir", runsDir, "--image", image, "--pull", "never", "--", "python3", "/app/attack.py"},
		{"test-sandbox", "--allow-old-engine", "--quiet", "--runs-dir", runsDir, "--image", image, "--pull", "never"},
	} {
		t.Run(args[0], func(t *testing.T) {
			c, code := RunCLI(t, id, []string{"OPENAI_API_KEY=sk-e2e"}, args...)
			stderr := c.Stderr.String()
			if code != 5 {
				t.Errorf("exit %d, want 5\nstderr:\n%s", code, stderr)
			}
			for _, s := range []string{"workload image " + image + " " + want, "rebuild the image without VOLUME"} {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not say %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(c.Stdout.String(), "RT2 ") {
				t.Errorf("the attack ran:\n%s", c.Stdout.String())
			}
		})
	}
	RequireNothingLeft(t, label)
	if ps := docker(t, "ps", "-aq", "--filter", "ancestor="+image); ps != "" {
		t.Errorf("containers of the image were created: %s", ps)
	}
	if v := newVolumes(before, volumes(t)); len(v) > 0 {
		t.Errorf("volumes left: %v", v)
	}
	assertNoMountsLeft(t, runsDir)
	launcherRefusesVolumes(t, image, label)
	probeReportsVolumes(t, image, label)
	if v := newVolumes(before, volumes(t)); len(v) > 0 {
		t.Errorf("volumes left after the launcher's and the probe's containers: %v", v)
	}
}

// launcherRefusesVolumes runs the launcher as a workload container's
// entrypoint (the agent's policy, noexec tmpfs at /tmp, /sandbox-work and
// the output directory, as the harness mounts them) in the image, whose
// volumes the engine mounts below each: the launch must stop, exit 5,
// naming every volume, before attack.py runs (which would otherwise load
// a library it wrote to /tmp/v). --rm removes the anonymous volumes.
func launcherRefusesVolumes(t *testing.T, image, label string) {
	t.Helper()
	sp, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := spec.Resolve(sp)
	if err != nil {
		t.Fatal(err)
	}
	agent := prof.Containers[orchestrate.RoleAgent]
	pol, err := json.Marshal(agent.Harden)
	if err != nil {
		t.Fatal(err)
	}
	bin := Binary(t)
	args := []string{"run", "--rm", "--label", TestLabel, "--label", label, "--network", "none", "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges:true", "--user", spec.User,
		"--tmpfs", spec.OutputDir + ":rw,noexec,nosuid,nodev,size=16m,mode=1777",
		"-v", bin + ":" + "/.mcpsidecar/mcpsidecar:ro", "--entrypoint", "/.mcpsidecar/mcpsidecar"}
	for dir, opts := range agent.Tmpfs {
		args = append(args, "--tmpfs", dir+":"+opts)
	}
	for k, v := range map[string]string{harden.EnvPolicy: string(pol), launcher.EnvSelf: "/.mcpsidecar/mcpsidecar",
		launcher.EnvShellAccess: "0", launcher.EnvStage: "", launcher.EnvExecAccepted: ""} {
		args = append(args, "-e", k+"="+v)
	}
	args = append(args, image, "launch", "--", "python3", "/app/attack.py")
	cmd := exec.Command("docker", args...)
	out, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	t.Logf("launcher in a container with the image's volumes (exit %d):\n%s", code, out)
	if err == nil || code != launcher.ExitUnavailable {
		t.Errorf("launch exited %d (%v), want %d", code, err, launcher.ExitUnavailable)
	}
	for _, v := range volumePaths {
		if !strings.Contains(string(out), "a mount below it, "+v+" (") {
			t.Errorf("the launcher's refusal does not name %s", v)
		}
	}
	if strings.Contains(string(out), "RT2 ") {
		t.Errorf("the attack ran under the launcher")
	}
}

// probeReportsVolumes runs the probe suite (its own hardening off: only
// the mounts are measured) in a container of the image laid out as the
// harness lays out a workload's (noexec tmpfs at /tmp and /sandbox-work, a
// noexec bind at the output directory, made by package noexec as root),
// the engine's volumes below each. G06 T12 must report a violation naming
// each volume and none of the noexec paths: before the mount walk it wrote
// only to the declared paths and reported a pass (redteam2 finding 1).
func probeReportsVolumes(t *testing.T, image, label string) {
	t.Helper()
	bin := Binary(t)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	h, err := noexec.Mount(out)
	if err != nil {
		t.Fatalf("making %s noexec (the e2e tests run as root): %v", out, err)
	}
	t.Cleanup(func() { h.Release() })
	sp, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := spec.Resolve(sp)
	if err != nil {
		t.Fatal(err)
	}
	pctx, _ := json.Marshal(map[string]any{"sidecar_url": "http://mcp-sidecar.invalid:8000/mcp"})
	args := []string{"run", "--rm", "--label", TestLabel, "--label", label, "--network", "none", "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges:true", "--user", spec.User,
		"-v", out + ":" + spec.OutputDir, "-v", bin + ":/.mcpsidecar/mcpsidecar:ro", "--entrypoint", "/.mcpsidecar/mcpsidecar",
		"-e", "SANDBOX_AGENT_CONTAINER=1", "-e", probe.ContextEnv + "=" + string(pctx)}
	for dir, opts := range prof.Containers[orchestrate.RoleAgent].Tmpfs {
		args = append(args, "--tmpfs", dir+":"+opts)
	}
	args = append(args, image, "probe", "--unhardened", "--serialize-evidence")
	if o, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Logf("probe exited %v (violations are expected):\n%s", err, lastLines(string(o), 5))
	}
	rep, err := probe.LoadReport(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	t12 := rep.Find("G06", "T12")
	if t12 == nil || t12.Verdict != probe.Violation {
		t.Fatalf("G06/T12 with exec volumes below the writable paths: %+v, want a violation", t12)
	}
	t.Logf("G06/T12: %s: %s", t12.Tool.Summary, t12.Tool.Evidence)
	mapped, _, _ := strings.Cut(strings.TrimPrefix(t12.Tool.Evidence, "mapped_in="), ";")
	var got []string
	for _, m := range strings.Split(mapped, ",") {
		dir, _, _ := strings.Cut(m, " (")
		got = append(got, dir)
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(volumePaths)); !slices.Equal(got, want) {
		t.Errorf("G06/T12 mapped in %q, want exactly the volumes %q", got, want)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
