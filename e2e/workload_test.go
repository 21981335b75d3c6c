//go:build docker

package e2e

// Bring your own workload (issue 16): `mcpsidecar run --image` runs a
// user's image under the launcher, with the fixtures of agent_test.go
// standing in for the model and Microsoft Learn. Nothing leaves the
// machine and nothing is pulled (--pull never): the images are built here.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// debianImage builds (once per machine: the script caches by recipe) the
// Debian image with python3, by scripts/build-debian-image.sh. A cold
// build takes minutes; every later call is a cache hit.
var (
	debianOnce sync.Once
	debianTag  string
	debianErr  error
)

func debianImage(t *testing.T) string {
	t.Helper()
	debianOnce.Do(func() {
		start := time.Now()
		cmd := exec.Command(filepath.Join(repoRoot(t), "scripts", "build-debian-image.sh"))
		cmd.Env = append(os.Environ(), "MCPSIDECAR_IMAGE_LABELS=mcpsidecar.test=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			debianErr = err
			debianTag = stderr.String()
			return
		}
		debianTag = strings.TrimSpace(string(out))
		t.Logf("debian image %s ready in %s: %s", debianTag, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	})
	if debianErr != nil {
		t.Fatalf("scripts/build-debian-image.sh: %v\n%s", debianErr, debianTag)
	}
	return debianTag
}

// pythonAgentImage is the Debian image plus examples/python-agent/agent.py
// at /app/agent.py, as the example's README builds it.
func pythonAgentImage(t *testing.T, dir string) string {
	t.Helper()
	base := debianImage(t)
	ctx := filepath.Join(dir, "python-agent")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "python-agent", "agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	agWrite(t, filepath.Join(ctx, "agent.py"), string(src))
	agWrite(t, filepath.Join(ctx, "Dockerfile"), "FROM "+base+"\nCOPY agent.py /app/agent.py\n")
	image := "mcpsidecar-e2e-python-agent:" + RandHex(6)
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	docker(t, "build", "-q", "--label", "mcpsidecar.test=1", "-t", image, ctx)
	return image
}

// probeWorkloadImage is FROM scratch with the static workloadprobe as its
// only file and command.
func probeWorkloadImage(t *testing.T, dir string) string {
	t.Helper()
	ctx := filepath.Join(dir, "workloadprobe")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	goBuild(t, "./e2e/fixtures/cmd/workloadprobe", filepath.Join(ctx, "workloadprobe"))
	agWrite(t, filepath.Join(ctx, "Dockerfile"), "FROM scratch\nCOPY workloadprobe /workloadprobe\nCMD [\"/workloadprobe\"]\n")
	image := "mcpsidecar-e2e-workloadprobe:" + RandHex(6)
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	docker(t, "build", "-q", "--label", "mcpsidecar.test=1", "-t", image, ctx)
	return image
}

// wlVerdict reads run-metadata.json's verdict.
func wlVerdict(t *testing.T, runDir string) (bool, map[string]string) {
	t.Helper()
	var md struct {
		Verdict struct {
			OK     bool `json:"ok"`
			Checks []struct {
				Name   string `json:"name"`
				OK     bool   `json:"ok"`
				Detail string `json:"detail"`
			} `json:"checks"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(agRead(t, filepath.Join(runDir, "run-metadata.json"))), &md); err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{}
	for _, c := range md.Verdict.Checks {
		state := "FAIL"
		if c.OK {
			state = "ok"
		}
		checks[c.Name] = state + ": " + c.Detail
	}
	return md.Verdict.OK, checks
}

// wlHardenReport reads the launcher's report in the agent-role output.
func wlHardenReport(t *testing.T, runDir string) map[string]bool {
	t.Helper()
	var rep struct {
		Role   string `json:"role"`
		Layers []struct {
			Name     string `json:"name"`
			Enforced bool   `json:"enforced"`
		} `json:"layers"`
	}
	if err := json.Unmarshal([]byte(agRead(t, agFind(t, runDir, "harden-report.json"))), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Role != "workload" {
		t.Errorf("harden report role %q, want workload (the launcher's)", rep.Role)
	}
	out := map[string]bool{}
	for _, l := range rep.Layers {
		out[l.Name] = l.Enforced
	}
	return out
}

// TestWorkloadStaticProbe: a static program in a FROM-scratch image, run
// with the image's own command, finds every forbidden action refused and
// every allowed one working, and the run's verdict holds.
func TestWorkloadStaticProbe(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	image := probeWorkloadImage(t, s.dir)
	r := s.runWith(t, "task", "--image", image, "--pull", "never")
	var results []struct {
		Name, Want, Error string
		OK                bool
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var res struct {
			Name, Want, Error string
			OK                bool
		}
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			continue // the run's own lines
		}
		results = append(results, res)
		t.Logf("%-50s want %-8s ok=%v %s", res.Name, res.Want, res.OK, res.Error)
		if res.OK != (res.Want == "allowed") {
			t.Errorf("%s: want %s, got ok=%v (%s)", res.Name, res.Want, res.OK, res.Error)
		}
	}
	if len(results) < 10 {
		t.Fatalf("the workload reported %d attempts, want every one (stdout:\n%s)", len(results), r.stdout)
	}
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v", r.err)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	ok, checks := wlVerdict(t, runDir)
	if !ok {
		t.Errorf("verdict failed: %v", checks)
	}
	for _, c := range []string{"workload exited 0", "sidecar audit complete", "agent hardening report lists every required layer"} {
		if !strings.HasPrefix(checks[c], "ok") {
			t.Errorf("verdict check %q: %q", c, checks[c])
		}
	}
	if layers := wlHardenReport(t, runDir); !layers["no-spawn"] || !layers["landlock-fs"] || !layers["syscall-deny"] {
		t.Errorf("launcher layers %v: want no-spawn, landlock-fs and syscall-deny enforced", layers)
	}
	if agRead(t, agFind(t, runDir, "probe-note.txt")) != "written\n" {
		t.Error("the workload's output file was not collected")
	}
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
}

// TestWorkloadPythonExample runs examples/python-agent in the Debian
// image: the seed's task through the sidecar and the gateway, the answer
// saved and printed, the audit and the timeline complete, nothing left.
func TestWorkloadPythonExample(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	image := pythonAgentImage(t, s.dir)
	r := s.runWith(t, "task", "--image", image, "--pull", "never", "--", "python3", "/app/agent.py")
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	agCheckAnswer(t, runDir, r.stdout)
	search := agCheckAudit(t, runDir)
	byHost := map[string]int{}
	for _, line := range agLines(t, filepath.Join(runDir, "egress-decisions.jsonl")) {
		var d agDecision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		if d.Decision != "allow" {
			t.Errorf("gateway denied a request of the run: %s", line)
		}
		byHost[d.Host]++
	}
	if byHost[agModelHost] < 3 || byHost[agLearnHost] < 1 {
		t.Errorf("gateway decisions by host %v: want at least 3 model requests and the Learn search", byHost)
	}
	checkTimelineLinksSearch(t, runDir, agLearnHost)
	ok, checks := wlVerdict(t, runDir)
	if !ok {
		t.Errorf("verdict failed: %v", checks)
	}
	if !strings.Contains(checks["sidecar audit complete"], "tools/call") {
		t.Errorf("audit check %q does not count the search (%s)", checks["sidecar audit complete"], search.CorrelationID)
	}
	if layers := wlHardenReport(t, runDir); !layers["no-spawn"] || !layers["landlock-fs"] {
		t.Errorf("launcher layers %v", layers)
	}
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
	t.Logf("FIGURE python example offline run wall time: %s", r.wall.Round(time.Millisecond))
}

// TestWorkloadMissingImage: with --pull never a missing image stops the run
// before anything is created, and the error says why and what to do.
func TestWorkloadMissingImage(t *testing.T) {
	NeedDocker(t)
	bin := Binary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "run", "--runs-dir", dir, "--allow-old-engine", "--image", "mcpsidecar-e2e-absent:"+RandHex(6), "--pull", "never", "--", "true")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-e2e", "MCPSIDECAR_LABELS=mcpsidecar.test=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not in the engine, and --pull never forbids pulling it") {
		t.Fatalf("want a clear refusal, got %v:\n%s", err, out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 5 {
		t.Errorf("exit code %d, want 5 (environment unavailable)", code)
	}
}
