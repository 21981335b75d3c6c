//go:build docker

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstantWorkloadObserved: a workload that exits the moment it starts
// is still read from outside, hardened, on both output paths: every role
// is held at start, hardened, until the host has read its process
// (internal/hold), so it cannot end before its observation. Before the
// hold came after the hardening, such a workload raced its observation:
// on the engine-only path, under load, it ended first and the observing
// helper was killed with its pid namespace.
func TestInstantWorkloadObserved(t *testing.T) {
	NeedDocker(t)
	bin := Binary(t)
	dir := t.TempDir()
	image := probeWorkloadImage(t, dir)
	for _, mode := range []string{"bind", "volume"} {
		t.Run(mode, func(t *testing.T) {
			id := RandHex(6)
			runs, out, err := runExitNow(t, bin, image, filepath.Join(dir, "runs-"+mode), mode, id)
			var md struct {
				Observed   map[string]struct{ Seen bool } `json:"observed"`
				Containers []struct {
					Role     string `json:"role"`
					ExitCode *int   `json:"exit_code"`
				} `json:"containers"`
			}
			b, rerr := os.ReadFile(filepath.Join(runs[0], "run-metadata.json"))
			if rerr != nil || json.Unmarshal(b, &md) != nil {
				t.Fatalf("run-metadata.json: %v\n%s", rerr, out)
			}
			for _, c := range md.Containers {
				if c.Role == "agent" && (c.ExitCode == nil || *c.ExitCode != 0) {
					t.Errorf("the workload's exit code is %v, want 0 (run: %v)\n%s", fmtExit(c.ExitCode), err, out)
				}
			}
			_, checks := wlVerdict(t, runs[0])
			for _, role := range []string{"agent", "gateway", "sidecar"} {
				if c := checks[role+" hardening seen from outside"]; !strings.HasPrefix(c, "ok") || !md.Observed[role].Seen {
					t.Errorf("%s: check %q, observed %+v", role, c, md.Observed[role])
				}
			}
			agCheckNothingLeft(t, id)
		})
	}
}

// TestPlantedReleaseFileIgnored: an image that carries files in its
// output directory, the start hold's release file among them, plants
// nothing: the output volume is mounted nocopy (and a release file
// without the run's token would be refused), so the workload waits for
// the harness's release and is read first, and the record holds only what
// the role wrote (red team, session 37: on the engine-only path Docker
// copied the image's /sandbox-output into the empty volume, the planted
// release file let the workload start unobserved, verdict ok).
func TestPlantedReleaseFileIgnored(t *testing.T) {
	NeedDocker(t)
	bin := Binary(t)
	dir := t.TempDir()
	ctx := filepath.Join(dir, "planted")
	if err := os.MkdirAll(filepath.Join(ctx, "plant", "sandbox-output"), 0o755); err != nil {
		t.Fatal(err)
	}
	goBuild(t, "./e2e/fixtures/cmd/workloadprobe", filepath.Join(ctx, "workloadprobe"))
	for name, data := range map[string]string{".mcpsidecar-start": "", "planted.txt": "not written by the role\n"} {
		agWrite(t, filepath.Join(ctx, "plant", "sandbox-output", name), data)
	}
	agWrite(t, filepath.Join(ctx, "Dockerfile"), "FROM scratch\nCOPY workloadprobe /workloadprobe\nCOPY --chown=65532:65532 plant/ /\nCMD [\"/workloadprobe\"]\n")
	image := "mcpsidecar-e2e-planted:" + RandHex(6)
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	docker(t, "build", "-q", "--label", "mcpsidecar.test=1", "-t", image, ctx)
	for _, mode := range []string{"bind", "volume"} {
		t.Run(mode, func(t *testing.T) {
			id := RandHex(6)
			runs, out, err := runExitNow(t, bin, image, filepath.Join(dir, "runs-"+mode), mode, id)
			for _, name := range []string{"planted.txt", ".mcpsidecar-start"} {
				if _, err := os.Lstat(filepath.Join(runs[0], "agent", name)); err == nil {
					t.Errorf("the record holds %s from the image", name)
				}
			}
			_, checks := wlVerdict(t, runs[0])
			if c := checks["agent hardening seen from outside"]; !strings.HasPrefix(c, "ok") {
				t.Errorf("agent hardening seen from outside: %q (run: %v)\n%s", c, err, out)
			}
			agCheckNothingLeft(t, id)
		})
	}
}

// runExitNow runs image's /workloadprobe exit-now with the output path
// mode (bind or volume) into runsDir, and returns its one run directory
// (in a slice of one), its output and its error.
func runExitNow(t *testing.T, bin, image, runsDir, mode, id string) ([]string, []byte, error) {
	t.Helper()
	cmd := exec.Command(bin, "run", "--runs-dir", runsDir, "--allow-old-engine", "--image", image, "--pull", "never", "--", "/workloadprobe", "exit-now")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-e2e", "MCPSIDECAR_OUTPUT="+mode,
		"MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+id)
	out, err := cmd.CombinedOutput()
	runs, _ := filepath.Glob(filepath.Join(runsDir, "run-*"))
	if len(runs) != 1 {
		t.Fatalf("want one run directory, got %v (run: %v)\n%s", runs, err, out)
	}
	return runs, out, err
}
