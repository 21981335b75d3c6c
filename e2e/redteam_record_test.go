//go:build docker

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// redteamForgeSrc writes one agent-turns.jsonl line whose error holds a
// newline followed by a made-up timeline row.
const redteamForgeSrc = `package main

import (
	"os"
	"path/filepath"
)

func main() {
	line := "{\"time\":\"2026-01-01T00:00:00Z\",\"kind\":\"error\",\"error\":\"x\\n    +0.500s     gateway  REDTEAM-FORGED-ROW allowed CONNECT evil.test:443\"}\n"
	os.WriteFile(filepath.Join(os.Getenv("MCPSIDECAR_OUTPUT_DIR"), "agent-turns.jsonl"), []byte(line), 0o644)
}
`

// TestRedteamRunsShowLineInjection: the workload writes its own
// agent-turns.jsonl; an error string with a newline comes out of
// `runs show` as a line of its own, so the workload can add rows to the
// timeline the user reads that look like the gateway's (the live progress
// lines escape it as \n; runs show does not).
//
// FINDING (fails on the code it was written against): expected the
// newline escaped, got a forged row at the start of a line.
func TestRedteamRunsShowLineInjection(t *testing.T) {
	img := redteamImage(t, "forge", redteamForgeSrc)
	bin := os.Getenv("MCPSIDECAR_BIN")
	runsDir := t.TempDir()
	cmd := exec.Command(bin, "run", "--allow-old-engine", "--quiet", "--runs-dir", runsDir, "--timeout", "2m",
		"--image", img, "--pull", "never")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-redteam-000000000000000000000000000000000000", "MCPSIDECAR_ALLOW_OLD_ENGINE=1")
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("run: %v\n%s", err, out)
	}
	runs, _ := filepath.Glob(filepath.Join(runsDir, "run-*"))
	if len(runs) != 1 {
		t.Fatalf("want one run directory, got %v", runs)
	}
	out, err := exec.Command(bin, "runs", "show", "--runs-dir", runsDir, filepath.Base(runs[0])).CombinedOutput()
	if err != nil {
		t.Logf("runs show: %v", err)
	}
	if !strings.Contains(string(out), "REDTEAM-FORGED-ROW") {
		t.Fatalf("the forged line is not in runs show at all (the test no longer exercises the path):\n%s", out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "REDTEAM-FORGED-ROW") && strings.HasPrefix(strings.TrimSpace(l), "+0.500s") {
			t.Errorf("runs show printed a workload-forged timeline row on a line of its own: %q", l)
		}
	}
}
