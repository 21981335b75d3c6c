//go:build docker

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runningCount counts the running containers carrying label.
func runningCount(t *testing.T, label string) int {
	t.Helper()
	out := docker(t, "ps", "-q", "--filter", "label="+label, "--filter", "status=running")
	return len(strings.Fields(out))
}

// TestKeepSurvivesGC (issue 18): a --keep run's containers and networks
// survive the automatic gc of the next run, its gateway and sidecar stay
// up, and `runs rm` removes them with the run directory. The next run
// also shows the working directory's sandbox_spec.toml being used.
func TestKeepSurvivesGC(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--keep", "--quiet", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor --keep exited %d; stderr:\n%s", code, c.Stderr.String())
	}
	kept := hxOnlyRun(t, runsDir)
	cs, ns := Leftovers(t, label)
	if len(cs) != 3 || len(ns) != 2 {
		t.Fatalf("--keep kept %d containers and %d networks, want 3 and 2", len(cs), len(ns))
	}
	if n := runningCount(t, label); n != 2 {
		t.Errorf("%d kept containers running, want 2 (gateway and sidecar)", n)
	}
	if !strings.Contains(c.Stderr.String(), "mcpsidecar runs rm "+filepath.Base(kept)+" --runs-dir "+runsDir) {
		t.Errorf("no runs rm command printed:\n%s", c.Stderr.String())
	}

	// The next run, from a directory holding a sandbox_spec.toml, gcs first.
	work := t.TempDir()
	def, err := exec.Command(Binary(t), "spec", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "sandbox_spec.toml"), def, 0o644); err != nil {
		t.Fatal(err)
	}
	next := NewCLI(t, id, nil, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	next.Cmd.Dir = work
	if err := next.Cmd.Run(); exitCode(t, err) != 0 {
		t.Fatalf("second doctor exited %d; stderr:\n%s", exitCode(t, err), next.Stderr.String())
	}
	if !strings.Contains(next.Stderr.String(), "spec: sandbox_spec.toml\n") {
		t.Errorf("the second run did not name the working directory's spec:\n%s", next.Stderr.String())
	}
	if cs2, ns2 := Leftovers(t, label); len(cs2) != 3 || len(ns2) != 2 {
		t.Fatalf("after another run's gc: %d containers, %d networks; want the kept 3 and 2", len(cs2), len(ns2))
	}
	if n := runningCount(t, label); n != 2 {
		t.Errorf("after another run: %d kept containers running, want 2", n)
	}
	rm, code := RunCLI(t, id, nil, "runs", "rm", filepath.Base(kept), "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("runs rm exited %d: %s%s", code, rm.Stdout.String(), rm.Stderr.String())
	}
	RequireNothingLeft(t, label)
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Errorf("runs rm left %s: %v", kept, err)
	}
}
