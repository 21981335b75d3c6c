//go:build docker

package e2e

// The offline end-to-end run of the whole system: `mcpsidecar run` with the
// real engine, the real gateway, sidecar and agent, and two fixture
// containers standing in for the outside world (e2e/fixtures): a fake
// OpenAI-compatible model at fake-model.e2e.test and a fake Microsoft Learn
// MCP server answering as learn.microsoft.com over TLS with a test CA that
// the run's image trusts instead of the host's bundle (MCPSIDECAR_CA_BUNDLE).
// Nothing leaves the machine: the fixtures join the run's egress network
// (with those names as aliases) as soon as the harness creates it, before
// any container of the run can look a name up; the test checks that order.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
)

// Names the fixtures answer to on the run's egress network.
const (
	agModelHost = "fake-model.e2e.test"
	agLearnHost = "learn.microsoft.com"
)

func TestAgentOfflineRun(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)

	t.Run("task", func(t *testing.T) {
		r := s.run(t, "task")
		if r.err != nil {
			t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
		}
		runDir := agOnlyRunDir(t, r.runsDir)
		agCheckAnswer(t, runDir, r.stdout)
		search := agCheckAudit(t, runDir)
		agCheckDecisions(t, runDir, search)
		checkTimelineLinksSearch(t, runDir, agLearnHost) // the timeline joins the search call to its upstream request
		agCheckNoSecret(t, runDir, s.key)
		agCheckNothingLeft(t, r.id)
		agReportFigures(t, runDir, r.wall, r.w.peak)
	})

	// A model API that answers 500 once: the agent retries through the
	// gateway (the same correlation id, twice in the decision log) and the
	// run succeeds.
	t.Run("500 then success", func(t *testing.T) {
		r := s.run(t, "flaky")
		if r.err != nil {
			t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
		}
		runDir := agOnlyRunDir(t, r.runsDir)
		agCheckAnswer(t, runDir, r.stdout)
		if !strings.Contains(agRead(t, filepath.Join(runDir, "stderr.txt")), "answered 500; retry 1 of 3") {
			t.Error("stderr.txt does not show the retry")
		}
		first := agTurns(t, runDir)[0].CorrelationID
		if n := agDecisionsFor(t, runDir, first); n != 2 {
			t.Errorf("the first model request %s has %d gateway decisions, want 2 (the 500 and the retry)", first, n)
		}
		agCheckNoSecret(t, runDir, s.key)
		agCheckNothingLeft(t, r.id)
	})

	// A model that makes the mistakes real models make (an extra key, a
	// mistyped argument, malformed JSON, an unknown tool, reasoning_content
	// in its replies) gets each one back as a tool result, corrects itself,
	// and the run succeeds with every refusal recorded.
	t.Run("sloppy model recovers", func(t *testing.T) {
		r := s.run(t, "sloppy")
		if r.err != nil {
			t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
		}
		runDir := agOnlyRunDir(t, r.runsDir)
		agCheckAnswer(t, runDir, r.stdout)
		refused := 0
		for _, tr := range agTurns(t, runDir) {
			if tr.Kind == "tool_call" && strings.HasPrefix(tr.Error, "refused: ") {
				refused++
			}
		}
		if refused != 3 {
			t.Errorf("%d refused tool calls in agent-turns.jsonl, want 3", refused)
		}
		agCheckNothingLeft(t, r.id)
	})

	// A question of the user's own, answered without any tool: the seed's
	// task checks (format read, code-sample search) do not apply, and the
	// run succeeds.
	t.Run("custom question without tools", func(t *testing.T) {
		r := s.runWith(t, "direct", "--question", "What is the capital of France?")
		if r.err != nil {
			t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
		}
		runDir := agOnlyRunDir(t, r.runsDir)
		answer := agRead(t, filepath.Join(runDir, "answer.txt"))
		if answer != fakemodel.DirectAnswer || agRead(t, filepath.Join(runDir, "stdout.txt")) != answer || !strings.Contains(r.stdout, answer) {
			t.Errorf("answer.txt %q, stdout.txt %q, printed %q; want %q in all three", answer, agRead(t, filepath.Join(runDir, "stdout.txt")), r.stdout, fakemodel.DirectAnswer)
		}
		agCheckNoSecret(t, runDir, s.key)
		agCheckNothingLeft(t, r.id)
	})

	// A model that keeps calling a tool it was not offered: each call is
	// refused back to it, then the agent stops with a
	// clear error, nothing is saved, the verdict names the failed checks,
	// and every artifact is still there.
	t.Run("unknown tool", func(t *testing.T) {
		r := s.run(t, "unknown-tool")
		if r.err == nil {
			t.Fatal("mcpsidecar run succeeded with a model calling an unknown tool")
		}
		runDir := agOnlyRunDir(t, r.runsDir)
		turns := agTurns(t, runDir)
		if last := turns[len(turns)-1]; last.Kind != "error" || !strings.Contains(last.Error, `tool calls in a row refused; last: unknown tool "run_shell"`) {
			t.Errorf("last turn %+v, want the refusal budget's error naming the unknown tool", last)
		}
		if b, err := os.ReadFile(filepath.Join(runDir, "answer.txt")); err == nil && len(bytes.TrimSpace(b)) > 0 {
			t.Errorf("answer.txt holds %q after a failed run", b)
		}
		agCheckVerdictFails(t, runDir, "agent exit code")
		agCheckNoSecret(t, runDir, s.key)
		agCheckNothingLeft(t, r.id)
	})
}

// agSetup is what the offline runs share: one binary and one CA (so every
// run after the first reuses the run image), the fixture image, the key.
type agSetup struct {
	id, dir, bin, ca, image, key string
	// modelTLS serves the fake model over TLS (https base URL).
	modelTLS bool
	// modelArgs are extra flags for the model fixture.
	modelArgs []string
	// interruptWhen, when set, is polled during the run; once it holds,
	// the run is sent SIGINT.
	interruptWhen func(r agResult) bool
	// env is added to the run's environment.
	env []string
	// sys, when set, runs mcpsidecar as another user (rootless_test.go).
	sys *syscall.SysProcAttr
	// leaveOn is the role whose end disconnects the fixtures ("":
	// the agent's; agWatchLeaving).
	leaveOn string
}

func agPrepare(t *testing.T) agSetup {
	t.Helper()
	s := agSetup{id: RandHex(6), dir: t.TempDir(), key: "sk-e2e-" + RandHex(16)}
	s.bin = agBinary(t, s.id, s.dir)
	s.ca = agCerts(t, s.dir)
	s.image = agFixtureImage(t, s.id, s.dir)
	t.Cleanup(func() { agRemoveRunImages(s.dir) })
	return s
}

// modelURL is the fake model's base URL.
func (s agSetup) modelURL() string {
	if s.modelTLS {
		return "https://" + agModelHost + "/v1"
	}
	return "http://" + agModelHost + "/v1"
}

// agResult is one `mcpsidecar run`.
type agResult struct {
	id, runsDir    string
	err            error
	stdout, stderr string
	wall           time.Duration
	w              *agWatcher
}

// run starts fixtures whose model plays behaviour, then `mcpsidecar run`.
func (s agSetup) run(t *testing.T, behaviour string) agResult {
	t.Helper()
	return s.runWith(t, behaviour)
}

// runWith is run with extra flags for `mcpsidecar run`.
func (s agSetup) runWith(t *testing.T, behaviour string, extra ...string) agResult {
	t.Helper()
	r := agResult{id: RandHex(6)}
	r.runsDir = filepath.Join(s.dir, "runs-"+r.id)
	fx := agStartFixturesWith(t, r.id, s.image, s.key, behaviour, s.modelTLS, s.modelArgs...)
	r.w = agWatchLeaving(t, r.id, fx, cmp.Or(s.leaveOn, "agent"))
	specFile := filepath.Join(s.dir, "sandbox_spec.toml")
	agWrite(t, specFile, `schema_version = 1
capabilities = ["network", "mcp_client", "openai_agents"]
allowed_domains = ["`+agModelHost+`", "`+agLearnHost+`"]
# The fixtures get addresses on the run's own egress network (the run's
# subnet pool, 10.213.0.0/16 by default, or Docker's default pools);
# nothing else on these ranges is reachable from it.
allowed_ip_addresses = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"run", "--spec", specFile, "--runs-dir", r.runsDir, "--allow-old-engine", "--timeout", "3m"}, extra...)
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = append(os.Environ(),
		"OPENAI_API_KEY="+s.key,
		"OPENAI_BASE_URL="+s.modelURL(),
		"MCPSIDECAR_CA_BUNDLE="+s.ca,
		"MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+r.id,
	)
	cmd.Env = append(cmd.Env, s.env...)
	cmd.SysProcAttr = s.sys
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() { agRemoveLeftovers(r.id, fx) })
	t.Cleanup(func() {
		if t.Failed() {
			agDumpRun(t, r.runsDir)
		}
	})
	start := time.Now()
	r.err = s.runCmd(t, cmd, r)
	r.wall = time.Since(start)
	r.stdout, r.stderr = stdout.String(), stderr.String()
	t.Logf("mcpsidecar %s (%s model) took %s; stderr:\n%s", strings.Join(args, " "), behaviour, r.wall.Round(time.Millisecond), r.stderr)
	r.w.stop()
	r.w.runsDir = r.runsDir
	r.w.checkOrder(t)
	return r
}

// runCmd runs cmd, interrupting it once s.interruptWhen holds.
func (s agSetup) runCmd(t *testing.T, cmd *exec.Cmd, r agResult) error {
	if s.interruptWhen == nil {
		return cmd.Run()
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			t.Errorf("the run ended (%v) before the moment to interrupt it came", err)
			return err
		case <-tick.C:
			if s.interruptWhen(r) {
				cmd.Process.Signal(os.Interrupt)
				return <-done
			}
		}
	}
}

func agOnlyRunDir(t *testing.T, runsDir string) string {
	t.Helper()
	entries, err := os.ReadDir(runsDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("runs dir holds %d entries (err %v), want one run", len(entries), err)
	}
	return filepath.Join(runsDir, entries[0].Name())
}

// agDumpRun logs the run's records, to explain a failure.
func agDumpRun(t *testing.T, runsDir string) {
	entries, _ := os.ReadDir(runsDir)
	for _, e := range entries {
		for _, name := range []string{"agent-turns.jsonl", "agent/agent-turns.jsonl", "mcp-sidecar-tool-calls.jsonl",
			"egress-decisions.jsonl", "mcp-sidecar-stderr.txt", "gateway-logs.json", "stderr.txt"} {
			if b, err := os.ReadFile(filepath.Join(runsDir, e.Name(), name)); err == nil {
				t.Logf("%s:\n%s", name, b)
			}
		}
	}
}

func agRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agCheckAnswer: answer.txt equals stdout.txt and what the run printed.
func agCheckAnswer(t *testing.T, runDir, printed string) {
	t.Helper()
	answer := strings.TrimSuffix(agRead(t, filepath.Join(runDir, "answer.txt")), "\n")
	saved := strings.TrimSuffix(agRead(t, filepath.Join(runDir, "stdout.txt")), "\n")
	if answer == "" || answer != saved {
		t.Errorf("answer.txt %q != stdout.txt %q", answer, saved)
	}
	if !strings.Contains(printed, answer) {
		t.Errorf("the run printed %q, which does not hold the answer %q", printed, answer)
	}
	if !strings.Contains(answer, "IHttpClientFactory") {
		t.Errorf("answer %q does not come from the scripted model", answer)
	}
}

// agAudit is the part of a sidecar audit line the test reads.
type agAudit struct {
	Kind          string         `json:"kind"`
	Name          string         `json:"name"`
	Arguments     map[string]any `json:"arguments"`
	OK            bool           `json:"ok"`
	CorrelationID string         `json:"correlation_id"`
}

// agCheckAudit finds the format read and the csharp code-sample search,
// and returns the search's audit line.
func agCheckAudit(t *testing.T, runDir string) agAudit {
	t.Helper()
	var read bool
	var search agAudit
	for _, line := range agLines(t, filepath.Join(runDir, "mcp-sidecar-tool-calls.jsonl")) {
		var a agAudit
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		switch {
		case a.Kind == "resources/read" && a.Name == "mcp-sidecar://instructions/answer-format.md" && a.OK:
			read = true
		case a.Kind == "tools/call" && a.Name == "microsoft_code_sample_search" && a.OK && a.Arguments["language"] == "csharp":
			search = a
		}
	}
	if !read {
		t.Error("audit log has no successful read of the answer format")
	}
	if search.Name == "" || len(search.CorrelationID) != 32 {
		t.Errorf("audit log has no successful csharp code-sample search with a correlation id (got %+v)", search)
	}
	return search
}

func agLines(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(agRead(t, path), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// agDecision is the part of a gateway decision line the test reads.
type agDecision struct {
	Method        string `json:"method"`
	Host          string `json:"host"`
	Decision      string `json:"decision"`
	CorrelationID string `json:"correlation_id"`
}

// agCheckDecisions: the model requests and the upstream request were
// allowed, each joined by its correlation id to the agent's turn or the
// sidecar's audit line.
func agCheckDecisions(t *testing.T, runDir string, search agAudit) {
	t.Helper()
	byID := map[string]agDecision{}
	for _, line := range agLines(t, filepath.Join(runDir, "egress-decisions.jsonl")) {
		var d agDecision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("decision line %q: %v", line, err)
		}
		if d.Decision != "allow" {
			t.Errorf("gateway denied a request of the run: %s", line)
		}
		if d.CorrelationID != "" {
			byID[d.CorrelationID] = d
		}
	}
	if d, ok := byID[search.CorrelationID]; !ok || d.Host != agLearnHost {
		t.Errorf("no allowed decision for %s joined to the code-sample search %s (got %+v)", agLearnHost, search.CorrelationID, d)
	}
	turns := agLines(t, agFind(t, runDir, "agent-turns.jsonl"))
	models := 0
	for _, line := range turns {
		var tr struct {
			Kind          string `json:"kind"`
			CorrelationID string `json:"correlation_id"`
		}
		json.Unmarshal([]byte(line), &tr)
		if tr.Kind != "model_request" {
			continue
		}
		models++
		if d, ok := byID[tr.CorrelationID]; !ok || d.Host != agModelHost {
			t.Errorf("model request %s has no allowed decision for %s (got %+v)", tr.CorrelationID, agModelHost, d)
		}
	}
	if models < 3 {
		t.Errorf("agent-turns.jsonl has %d model requests, want at least 3", models)
	}
}

// agTurn is the part of an agent-turns.jsonl line the test reads.
type agTurn struct {
	Kind          string  `json:"kind"`
	CorrelationID string  `json:"correlation_id"`
	DurationMS    float64 `json:"duration_ms"`
	Error         string  `json:"error"`
}

func agTurns(t *testing.T, runDir string) []agTurn {
	t.Helper()
	var out []agTurn
	for _, line := range agLines(t, agFind(t, runDir, "agent-turns.jsonl")) {
		var tr agTurn
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatalf("turn line %q: %v", line, err)
		}
		out = append(out, tr)
	}
	if len(out) == 0 {
		t.Fatal("agent-turns.jsonl is empty")
	}
	return out
}

// agDecisionsFor counts the gateway decisions carrying a correlation id.
func agDecisionsFor(t *testing.T, runDir, id string) int {
	t.Helper()
	n := 0
	for _, line := range agLines(t, filepath.Join(runDir, "egress-decisions.jsonl")) {
		var d agDecision
		if json.Unmarshal([]byte(line), &d) == nil && d.CorrelationID == id {
			n++
		}
	}
	return n
}

// agCheckVerdictFails: run-metadata.json's verdict is not ok and names the
// failed check.
func agCheckVerdictFails(t *testing.T, runDir, check string) {
	t.Helper()
	var md struct {
		Verdict struct {
			OK     bool `json:"ok"`
			Checks []struct {
				Name string `json:"name"`
				OK   bool   `json:"ok"`
			} `json:"checks"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(agRead(t, filepath.Join(runDir, "run-metadata.json"))), &md); err != nil {
		t.Fatalf("run-metadata.json: %v", err)
	}
	failed := false
	for _, c := range md.Verdict.Checks {
		failed = failed || (c.Name == check && !c.OK)
	}
	if md.Verdict.OK || !failed {
		t.Errorf("verdict %+v, want not ok with %q failed", md.Verdict, check)
	}
}

// agFind returns the path of name in the run dir or one of its role dirs.
func agFind(t *testing.T, runDir, name string) string {
	t.Helper()
	for _, p := range []string{filepath.Join(runDir, name), filepath.Join(runDir, "agent", name)} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s not found in %s", name, runDir)
	return ""
}

// agCheckNoSecret: the fake key's value is in no file of the run.
func agCheckNoSecret(t *testing.T, runDir, key string) {
	t.Helper()
	filepath.WalkDir(runDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(key)) {
			t.Errorf("%s contains the API key", path)
		}
		return nil
	})
}

// agCheckNothingLeft: no container or network of the run remains.
func agCheckNothingLeft(t *testing.T, id string) {
	t.Helper()
	filter := "label=mcpsidecar.e2e=" + id
	if out := docker(t, "ps", "-aq", "--filter", filter); out != "" {
		t.Errorf("containers left: %s", out)
	}
	if out := docker(t, "network", "ls", "-q", "--filter", filter); out != "" {
		t.Errorf("networks left: %s", out)
	}
	if out := docker(t, "volume", "ls", "-q", "--filter", filter); out != "" {
		t.Errorf("volumes left: %s", out)
	}
}

// agReportFigures logs the phase table and peak memory (docs/PERFORMANCE.md).
func agReportFigures(t *testing.T, runDir string, wall time.Duration, agentPeak int64) {
	t.Helper()
	var md struct {
		Phases []struct {
			Name       string  `json:"name"`
			DurationMS float64 `json:"duration_ms"`
		} `json:"phases"`
		Containers []struct {
			Role     string `json:"role"`
			PeakMem  int64  `json:"peak_memory_bytes"`
			ExitCode *int   `json:"exit_code"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(agRead(t, filepath.Join(runDir, "run-metadata.json"))), &md); err != nil {
		t.Fatalf("run-metadata.json: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "FIGURES wall %.0f ms\n", float64(wall.Microseconds())/1000)
	for _, p := range md.Phases {
		fmt.Fprintf(&b, "FIGURES phase %-10s %8.1f ms\n", p.Name, p.DurationMS)
	}
	for _, c := range md.Containers {
		fmt.Fprintf(&b, "FIGURES peak_memory %-8s %6.1f MiB\n", c.Role, float64(c.PeakMem)/(1<<20))
		if c.Role == "agent" && (c.ExitCode == nil || *c.ExitCode != 0) {
			t.Errorf("run-metadata.json: agent exit code %v, want 0", c.ExitCode)
		}
	}
	fmt.Fprintf(&b, "FIGURES peak_memory agent (cgroup) %.1f MiB\n", float64(agentPeak)/(1<<20))
	var model, tools float64
	for _, line := range agLines(t, agFind(t, runDir, "agent-turns.jsonl")) {
		var tr struct {
			Kind       string  `json:"kind"`
			DurationMS float64 `json:"duration_ms"`
		}
		json.Unmarshal([]byte(line), &tr)
		switch tr.Kind {
		case "model_request":
			model += tr.DurationMS
		case "tool_call", "answer_saved":
			tools += tr.DurationMS
		}
	}
	fmt.Fprintf(&b, "FIGURES agent model time %.1f ms, tool time %.1f ms\n", model, tools)
	t.Log("\n" + b.String())
}
