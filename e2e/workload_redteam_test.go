//go:build docker

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkloadPythonRedTeam runs e2e/fixtures/redteam/redteam.py in the
// Debian image under the launcher (no shell_access): the ways out a
// Python workload would try, each one an attempt with an expected result.
func TestWorkloadPythonRedTeam(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	ctx := filepath.Join(s.dir, "redteam")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "e2e", "fixtures", "redteam", "redteam.py"))
	if err != nil {
		t.Fatal(err)
	}
	agWrite(t, filepath.Join(ctx, "redteam.py"), string(src))
	agWrite(t, filepath.Join(ctx, "Dockerfile"), "FROM "+debianImage(t)+"\nCOPY redteam.py /app/redteam.py\n")
	image := "mcpsidecar-e2e-redteam:" + RandHex(6)
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	docker(t, "build", "-q", "--label", "mcpsidecar.test=1", "-t", image, ctx)

	r := s.runWith(t, "task", "--image", image, "--pull", "never", "--", "python3", "/app/redteam.py")
	allowed := map[string]bool{"in-image library (allowed)": true, "write the output dir (allowed)": true, "connect mcp-sidecar:8000 (allowed)": true}
	// Every other attempt must be refused: among them a library written to
	// /tmp, /sandbox-work or the output directory, loaded with ctypes or
	// mapped and mprotect'ed executable (every writable path is noexec;
	// the output directory by the host's mount, internal/noexec).
	seen := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		var a struct {
			Name, Error string
			OK          bool
		}
		if json.Unmarshal([]byte(line), &a) != nil || a.Name == "" {
			continue
		}
		seen++
		t.Logf("%-45s ok=%-5v %s", a.Name, a.OK, a.Error)
		switch {
		case allowed[a.Name] && !a.OK:
			t.Errorf("%s: want allowed, got %s", a.Name, a.Error)
		case !allowed[a.Name] && a.OK:
			t.Errorf("%s: want refused, but it succeeded", a.Name)
		}
	}
	if seen < 27 {
		t.Fatalf("%d attempts reported, want every one\nstdout:\n%s", seen, r.stdout)
	}
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v", r.err)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	if !strings.Contains(agRead(t, filepath.Join(runDir, "stderr.txt")), "refused a program start") {
		t.Error("the supervisor's refusals are not in the workload's stderr")
	}
	agCheckNothingLeft(t, r.id)
	assertNoMountsLeft(t, r.runsDir)
}
