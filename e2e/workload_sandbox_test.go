//go:build docker

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/probe"
)

// TestWorkloadTestSandboxDebian: `test-sandbox --image` runs the probe
// suite in the Debian image under the launcher and finds no violation at
// all (G06 T12, a library written at run time mapped executable, among
// them: every writable path is noexec); the record says which image it
// measured.
func TestWorkloadTestSandboxDebian(t *testing.T) {
	NeedDocker(t)
	image := debianImage(t)
	id := RandHex(4)
	runsDir := t.TempDir()
	before, _ := os.ReadDir(runsDir)
	c, code := RunCLI(t, id, nil, "test-sandbox", "--allow-old-engine", "--quiet", "--runs-dir", runsDir, "--image", image, "--pull", "never")
	after, _ := os.ReadDir(runsDir)
	if len(after) != len(before)+1 {
		t.Fatalf("test-sandbox exited %d without a run directory\nstderr:\n%s", code, c.Stderr.String())
	}
	rep, err := probe.LoadReport(filepath.Join(runsDir, after[len(after)-1].Name(), "report.json"))
	if err != nil {
		t.Fatalf("test-sandbox exited %d: %v\nstderr:\n%s", code, err, c.Stderr.String())
	}
	t.Logf("test-sandbox --image %s (exit %d): %s", image, code, rep.Summary())
	for _, g := range rep.Groups {
		for _, c := range g.Capabilities {
			if c.Verdict == probe.Violation {
				t.Errorf("%s/%s %q: violation (%s)", g.ID, c.ID, c.Title, c.Tool.Summary)
			}
		}
	}
	if rep.Violations() != 0 || code != 0 {
		t.Errorf("test-sandbox exited %d with %d violations, want 0 and 0\nstderr:\n%s", code, rep.Violations(), c.Stderr.String())
	}
	// G06 T12 measured (refused), not passed for want of a writable path.
	if t12 := rep.Find("G06", "T12"); t12 == nil || t12.Verdict != probe.Pass || t12.Tool.Outcome != probe.Denied {
		t.Errorf("G06/T12: %+v, want the written library refused in every writable path", t12)
	} else {
		t.Logf("G06/T12: %s: %s", t12.Tool.Summary, t12.Tool.Evidence)
	}
	assertNoMountsLeft(t, runsDir)
	if !strings.Contains(c.Stderr.String(), "measuring the sandbox of workload image "+image) {
		t.Errorf("test-sandbox did not say which image it measured:\n%s", c.Stderr.String())
	}
	if n := rep.Probes(); n < 240 {
		t.Errorf("report has %d probes, want the whole catalogue", n)
	}
	entries, _ := os.ReadDir(runsDir)
	if len(entries) != 1 {
		t.Fatalf("%d run directories", len(entries))
	}
	runDir := filepath.Join(runsDir, entries[0].Name())
	md := agRead(t, filepath.Join(runDir, "run-metadata.json"))
	if !strings.Contains(md, "workload: image "+image) {
		t.Errorf("run-metadata.json does not say which image was measured (%s)", image)
	}
	var rp struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal([]byte(agRead(t, agFind(t, runDir, "harden-report.json"))), &rp); err != nil || rp.Role != "workload" {
		t.Errorf("harden report role %q (%v), want the launcher's (workload)", rp.Role, err)
	}
}

// TestWorkloadDebianUnhardened is the negative control: the same probe
// suite in the same Debian image with the hardening switched off (no
// launcher, no seccomp profile, root, executable tmpfs, no network at all)
// reports violations, so the clean report above is not an artefact of
// probes that cannot fail in this image.
func TestWorkloadDebianUnhardened(t *testing.T) {
	NeedDocker(t)
	image := debianImage(t)
	bin := Binary(t)
	id := RandHex(4)
	label := "mcpsidecar.e2e=workload-neg-" + id
	CleanupLabelled(t, label)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	pctx, _ := json.Marshal(map[string]any{"sidecar_url": "http://mcp-sidecar.invalid:8000/mcp"})
	probeDocker(t, "run", "--name", "mcpsidecar-workload-neg-"+id, "--label", TestLabel, "--label", label,
		"--network", "none", "--security-opt", "seccomp=unconfined", "--user", "0:0",
		"--tmpfs", "/tmp:rw,exec", "--tmpfs", "/sandbox-work:rw,exec",
		"-v", out+":/sandbox-output", "-v", bin+":/.mcpsidecar/mcpsidecar:ro",
		"-e", "SANDBOX_AGENT_CONTAINER=1", "-e", probe.ContextEnv+"="+string(pctx),
		"--entrypoint", "/.mcpsidecar/mcpsidecar", image, "probe", "--unhardened")
	rep, err := probe.LoadReport(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("debian image, hardening off: %s", rep.Summary())
	if rep.Violations() < 10 {
		t.Errorf("%d violations with the hardening off, want many", rep.Violations())
	}
	// Spawning, and code from writable paths (a program, a library
	// mapped executable), are violations here and not under the launcher.
	for _, key := range []string{"G06/T01", "G06/T04", "G06/T11", "G06/T12"} {
		g, p, _ := strings.Cut(key, "/")
		if c := rep.Find(g, p); c == nil || c.Verdict != probe.Violation {
			t.Errorf("%s: %+v, want a violation with the hardening off", key, c)
		}
	}
}

// assertNoMountsLeft: no mount of the run's output directories outlives
// the run (internal/noexec; gc removes what a killed run leaves).
func assertNoMountsLeft(t *testing.T, runsDir string) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), " "+runsDir+"/") {
		t.Errorf("mounts below %s left after the run:\n%s", runsDir, data)
	}
}
