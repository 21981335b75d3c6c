//go:build docker

package e2e

// The harness against the real engine: doctor's full lifecycle and its
// record, teardown on every path (SIGINT, SIGKILL then gc, timeout, a
// gateway that cannot start), planted links in an output directory, and
// twenty runs in a row. Every run uses doctor or a hidden sleeping
// workload: no model, no key, and no traffic leaves the machine.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// hxDoctorArtifacts are the files a doctor run of the default spec leaves.
var hxDoctorArtifacts = []string{
	"Dockerfile", "config.json", "egress-decisions.jsonl", "gateway-logs.json", "gateway-start-results.json",
	"landlock-policy.json", "mcp-sidecar-logs.json", "mcp-sidecar-metadata.json", "mcp-sidecar-start-results.json",
	"mcp-sidecar-stderr.txt", "mcp-sidecar-stdout.txt", "mcp-sidecar-tool-calls.jsonl", "resolved-profile.json",
	"run-metadata.json", "sandbox-spec.json", "seccomp-profile.json", "squid.conf", "stderr.txt", "stdout.txt",
	"timeline.jsonl", "report.html",
}

// hxMeta is the part of run-metadata.json the tests read.
type hxMeta struct {
	Schema   string `json:"schema"`
	RunID    string `json:"run_id"`
	Command  string `json:"command"`
	ExitCode int    `json:"exit_code"`
	Image    struct {
		Tag    string `json:"tag"`
		Method string `json:"method"`
	} `json:"image"`
	Networks []struct {
		Name     string `json:"name"`
		ID       string `json:"id"`
		Internal bool   `json:"internal"`
	} `json:"networks"`
	Containers []struct {
		Role       string `json:"role"`
		ID         string `json:"id"`
		ExitCode   *int   `json:"exit_code"`
		TimedOut   bool   `json:"timed_out"`
		PeakMemory uint64 `json:"peak_memory_bytes"`
	} `json:"containers"`
	Phases []struct {
		Name       string  `json:"name"`
		DurationMS float64 `json:"duration_ms"`
		OK         bool    `json:"ok"`
		Error      string  `json:"error"`
	} `json:"phases"`
	Verdict struct {
		OK bool `json:"ok"`
	} `json:"verdict"`
	Degradations     []string `json:"degradations"`
	ArtifactProblems []string `json:"artifact_problems"`
	Hardening        map[string]struct {
		Source string `json:"source"`
		ABI    int    `json:"abi"`
		Layers []struct {
			Name     string `json:"name"`
			Enforced bool   `json:"enforced"`
		} `json:"layers"`
	} `json:"hardening"`
}

func hxSetup(t *testing.T) (id, runsDir, label string) {
	t.Helper()
	NeedDocker(t)
	id = RandHex(6)
	label = "mcpsidecar.e2e=" + id
	CleanupLabelled(t, label)
	return id, filepath.Join(t.TempDir(), "runs"), label
}

func hxOnlyRun(t *testing.T, runsDir string) string {
	t.Helper()
	entries, err := os.ReadDir(runsDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("want exactly one run directory in %s, got %d (%v)", runsDir, len(entries), err)
	}
	return filepath.Join(runsDir, entries[0].Name())
}

func hxReadMeta(t *testing.T, runDir string) hxMeta {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m hxMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decoding run-metadata.json: %v", err)
	}
	return m
}

func (m hxMeta) role(r string) (exit *int, timedOut bool, ok bool) {
	for _, c := range m.Containers {
		if c.Role == r {
			return c.ExitCode, c.TimedOut, true
		}
	}
	return nil, false, false
}

func TestHarnessDoctor(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor exited %d\nstdout:\n%s\nstderr:\n%s", code, c.Stdout.String(), c.Stderr.String())
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	for _, name := range hxDoctorArtifacts {
		t.Run(name, func(t *testing.T) { hxWellFormed(t, filepath.Join(runDir, name)) })
	}
	m := hxReadMeta(t, runDir)
	if m.Schema != "mcpsidecar.run/v1" || m.Command != "doctor" || m.ExitCode != 0 || !m.Verdict.OK {
		t.Errorf("metadata: schema %q command %q exit %d verdict %v", m.Schema, m.Command, m.ExitCode, m.Verdict.OK)
	}
	if len(m.Networks) != 2 || len(m.Containers) != 3 {
		t.Errorf("metadata: %d networks, %d containers; want 2 and 3", len(m.Networks), len(m.Containers))
	}
	want := []string{"spec", "preflight", "image", "run-dir", "networks", "gateway", "sidecar", "agent", "wait", "collect", "teardown"}
	var got []string
	for _, p := range m.Phases {
		got = append(got, p.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("phases %v, want %v", got, want)
	}
	for _, line := range want {
		if !strings.Contains(c.Stderr.String(), "["+line) {
			t.Errorf("no progress line for phase %s on stderr", line)
		}
	}
	for _, row := range []string{"sidecar tools", "answer format", "gateway refuses .invalid", "no route out"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(row) + `\s+ok\s`).MatchString(c.Stdout.String()) {
			t.Errorf("check %q did not pass; stdout:\n%s", row, c.Stdout.String())
		}
	}
	if strings.Contains(c.Stderr.String(), "keeps the default route") {
		t.Errorf("a container kept its default route:\n%s", c.Stderr.String())
	}
	hxCheckHardening(t, m, c.Stderr.String())
	hxNoRealLookups(t, runDir, m)
}

// hxNoRealLookups: the run asked the gateway for no real name (every
// decision line's host is an IP literal or under a reserved suffix), so no
// DNS query left the machine, and run-metadata.json says the sidecar ran
// without its upstream (before --no-upstream, every doctor and test-sandbox
// run made the gateway resolve learn.microsoft.com).
func hxNoRealLookups(t *testing.T, runDir string, m hxMeta) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "egress-decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	reserved := []string{".invalid", ".test", ".example", ".internal"}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var d struct {
			Host       string `json:"host"`
			Decision   string `json:"decision"`
			Credential string `json:"credential"`
			ResolvedIP string `json:"resolved_ip"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("egress-decisions.jsonl:%d: %v", n, err)
		}
		host := strings.TrimSuffix(strings.ToLower(d.Host), ".")
		if net.ParseIP(strings.Trim(host, "[]")) != nil || slices.ContainsFunc(reserved, func(r string) bool { return strings.HasSuffix(host, r) }) {
			continue
		}
		// doctor's own check of the credential listener: a model request
		// without the run's placeholder, refused before any lookup (no
		// resolved address), so no DNS query was made for the name.
		if d.Decision == "deny" && d.Credential == "refused" && d.ResolvedIP == "" {
			continue
		}
		t.Errorf("egress-decisions.jsonl:%d: the gateway was asked for the real name %q (a DNS query leaves the machine): %s", n, d.Host, sc.Bytes())
	}
	const note = "sidecar upstream disabled for doctor/test-sandbox"
	if !slices.ContainsFunc(m.Degradations, func(d string) bool { return strings.Contains(d, note) }) {
		t.Errorf("degradations %q lack %q", m.Degradations, note)
	}
}

// hxCheckHardening: every role's report is in run-metadata.json as the
// role's claim, with the Landlock ABI it enforced, and printed.
func hxCheckHardening(t *testing.T, m hxMeta, stderr string) {
	t.Helper()
	for _, role := range []string{"gateway", "sidecar", "agent"} {
		h, ok := m.Hardening[role]
		if !ok {
			t.Errorf("run-metadata.json has no hardening for %s: %+v", role, m.Hardening)
			continue
		}
		if h.Source != "role report" || h.ABI < 1 || len(h.Layers) == 0 {
			t.Errorf("hardening %s: %+v", role, h)
		}
		if !strings.Contains(stderr, "hardening "+role+" (role report): Landlock ABI ") {
			t.Errorf("no hardening line for %s on stderr:\n%s", role, stderr)
		}
	}
}

func TestHarnessTestSandbox(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	c, code := RunCLI(t, id, nil, "test-sandbox", "--allow-old-engine", "--runs-dir", runsDir)
	runDir := hxOnlyRun(t, runsDir)
	if code != 0 {
		t.Errorf("test-sandbox exited %d (4: a violation); stderr tail:\n%s", code, hxTail(c.Stderr.String(), 2000))
	}
	RequireNothingLeft(t, label)
	for _, name := range []string{"report.json", "status.ndjson", "done.json", "config.json", "run-metadata.json"} {
		hxWellFormed(t, filepath.Join(runDir, name))
	}
	m := hxReadMeta(t, runDir)
	if m.Command != "test-sandbox" || !m.Verdict.OK || m.ExitCode != code {
		t.Errorf("metadata: command %q verdict %v exit %d (process %d)", m.Command, m.Verdict.OK, m.ExitCode, code)
	}
	hxNoRealLookups(t, runDir, m)
}

func hxTail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// hxWellFormed checks that an artifact exists, is a regular file, and
// parses when it is JSON or JSON lines.
func hxWellFormed(t *testing.T, path string) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("missing: %v", err)
	}
	if !st.Mode().IsRegular() {
		t.Fatalf("%s is %s, not a regular file", path, st.Mode().Type())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.HasSuffix(path, ".json"):
		if !json.Valid(b) {
			t.Errorf("%s is not valid JSON", path)
		}
	case strings.HasSuffix(path, ".jsonl"):
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if !json.Valid(sc.Bytes()) {
				t.Errorf("%s:%d is not valid JSON", path, n)
			}
		}
	}
}

func TestHarnessImportFallback(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	// The same binary plus trailing bytes: still runnable, but a new
	// content hash, so the image must be made now (and removed after).
	bin := filepath.Join(t.TempDir(), "mcpsidecar")
	data, err := os.ReadFile(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, append(data, []byte("e2e-import-"+id)...), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"MCPSIDECAR_IMAGE_METHOD=import", "MCPSIDECAR_IMAGE_BINARY=" + bin}
	c, code := RunCLI(t, id, env, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	runDir := hxOnlyRun(t, runsDir)
	m := hxReadMeta(t, runDir)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", m.Image.Tag).Run() })
	if code != 0 {
		t.Fatalf("doctor exited %d; stderr:\n%s", code, c.Stderr.String())
	}
	if m.Image.Method != "import" {
		t.Errorf("image method %q, want import", m.Image.Method)
	}
	if !strings.Contains(c.Stderr.String(), "imported from a root filesystem") {
		t.Errorf("stderr does not say the image was imported:\n%s", c.Stderr.String())
	}
	RequireNothingLeft(t, label)
}

// hxSleeper starts doctor with a workload that sleeps for an hour.
func hxSleeper(t *testing.T, id, runsDir string, extra ...string) *CLI {
	t.Helper()
	args := append([]string{"doctor", "--allow-old-engine", "--runs-dir", runsDir, "--x-workload-cmd", "x-sleep,1h"}, extra...)
	c := NewCLI(t, id, nil, args...)
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.Cmd.ProcessState == nil {
			_ = c.Cmd.Process.Kill()
			_ = c.Cmd.Wait()
		}
	})
	return c
}

func TestHarnessSIGINT(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	c := hxSleeper(t, id, runsDir)
	c.WaitFor(t, "[agent    ]", 3*time.Minute)
	hxCheckApplied(t, label)
	if err := c.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := hxWait(t, c, time.Minute)
	if code != 130 {
		t.Errorf("exit code %d after SIGINT, want 130; stderr:\n%s", code, c.Stderr.String())
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	m := hxReadMeta(t, runDir)
	if m.ExitCode != 130 {
		t.Errorf("metadata exit_code %d, want 130", m.ExitCode)
	}
	for _, name := range []string{"stdout.txt", "stderr.txt", "gateway-logs.json", "mcp-sidecar-logs.json", "timeline.jsonl"} {
		hxWellFormed(t, filepath.Join(runDir, name))
	}
}

// hxCheckApplied inspects the running sandbox: the engine really holds
// the hardening the plan asked for, each container mounts only its own
// output directory, and only the gateway may use an upstream resolver.
func hxCheckApplied(t *testing.T, label string) {
	t.Helper()
	cs, _ := Leftovers(t, label)
	if len(cs) != 3 {
		t.Fatalf("%d containers running, want 3", len(cs))
	}
	out, err := exec.Command("docker", append([]string{"inspect"}, cs...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Config struct {
			User   string
			Labels map[string]string
		}
		HostConfig struct {
			Binds          []string
			ReadonlyRootfs bool
			CapDrop        []string
			CapAdd         []string
			SecurityOpt    []string
			Privileged     bool
			Dns            []string
			CgroupnsMode   string
			PidsLimit      *int64
			Memory         int64
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		role := c.Config.Labels["mcpsidecar.role"]
		h := c.HostConfig
		if c.Config.User != "65532:65532" || !h.ReadonlyRootfs || h.Privileged || len(h.CapAdd) != 0 ||
			strings.Join(h.CapDrop, ",") != "ALL" || h.CgroupnsMode != "private" || h.PidsLimit == nil || h.Memory == 0 {
			t.Errorf("%s: user %q ro %v priv %v capadd %v capdrop %v cgroupns %q pids %v mem %d", role, c.Config.User,
				h.ReadonlyRootfs, h.Privileged, h.CapAdd, h.CapDrop, h.CgroupnsMode, h.PidsLimit, h.Memory)
		}
		opts := strings.Join(h.SecurityOpt, " ")
		if !strings.Contains(opts, "no-new-privileges:true") || !strings.Contains(opts, "seccomp=") {
			t.Errorf("%s: security options %.120s", role, opts)
		}
		if len(h.Binds) != 1 || !strings.HasSuffix(h.Binds[0], "/"+role+":/sandbox-output:rw") {
			t.Errorf("%s: binds %v, want only its own output directory", role, h.Binds)
		}
		wantDNS := "0.0.0.0"
		if role == "gateway" {
			wantDNS = ""
		}
		if strings.Join(h.Dns, ",") != wantDNS {
			t.Errorf("%s: dns %v, want %q", role, h.Dns, wantDNS)
		}
	}
}

func hxWait(t *testing.T, c *CLI, timeout time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Cmd.Wait() }()
	select {
	case err := <-done:
		return exitCode(t, err)
	case <-time.After(timeout):
		_ = c.Cmd.Process.Kill()
		t.Fatalf("mcpsidecar still running %s after it should have ended; stderr:\n%s", timeout, c.Stderr.String())
		return -1
	}
}

func TestHarnessSIGKILLThenGC(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	c := hxSleeper(t, id, runsDir)
	c.WaitFor(t, "[agent    ]", 3*time.Minute)
	if err := c.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Cmd.Wait()
	cs, ns := Leftovers(t, label)
	if len(cs) != 3 || len(ns) != 2 {
		t.Fatalf("after SIGKILL: %d containers, %d networks; want 3 and 2 (the test would prove nothing)", len(cs), len(ns))
	}
	g, code := RunCLI(t, id, nil, "gc", "--runs-dir", runsDir) // and the output mounts the killed run left
	if code != 0 {
		t.Fatalf("gc exited %d: %s", code, g.Stderr.String())
	}
	RequireNothingLeft(t, label)
	if n := strings.Count(g.Stdout.String(), "removed mount "+runsDir+"/"); n != 3 {
		t.Errorf("gc removed %d output mounts of the killed run, want 3 (one per role):\n%s", n, g.Stdout.String())
	}
	if !strings.Contains(g.Stdout.String(), "removed 3 container(s), 2 network(s)") && !strings.Contains(g.Stdout.String(), "removed") {
		t.Errorf("gc output:\n%s", g.Stdout.String())
	}
}

func TestHarnessTimeout(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	start := time.Now()
	c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--runs-dir", runsDir,
		"--x-workload-cmd", "x-sleep,1h", "--timeout", "3s")
	if code == 0 {
		t.Fatalf("a workload past its timeout exited 0; stderr:\n%s", c.Stderr.String())
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("took %s: the timeout did not stop the workload", d)
	}
	RequireNothingLeft(t, label)
	m := hxReadMeta(t, hxOnlyRun(t, runsDir))
	exit, timedOut, ok := m.role("agent")
	if !ok || !timedOut || exit == nil || *exit != 137 {
		t.Errorf("agent container: present %v, timed_out %v, exit %v; want timed out and killed (137)", ok, timedOut, exit)
	}
	if !strings.Contains(c.Stderr.String(), "timeout") {
		t.Errorf("stderr does not mention the timeout:\n%s", c.Stderr.String())
	}
}

func TestHarnessGatewayFailsToStart(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--runs-dir", runsDir,
		"--x-gateway-cmd", "gateway,--no-such-flag", "--ready-timeout", "20s")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	errText := c.Stderr.String()
	for _, want := range []string{"starting the gateway", "exited with code", "no-such-flag"} {
		if !strings.Contains(errText, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, errText)
		}
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	m := hxReadMeta(t, runDir)
	// The containers are created up front, and the sidecar's is started,
	// held, while the gateway becomes ready (orchestrate.Session.Apply):
	// so they are in the record. The sidecar hardened itself and waited
	// (internal/hold), but never got past its hold: no start results,
	// never said it was listening (it logs that once released); stopped
	// while held, it ended at once, not killed after the grace (137).
	// The agent never started (no exit code).
	if _, err := os.Stat(filepath.Join(runDir, "mcp-sidecar-start-results.json")); err == nil {
		t.Error("the sidecar ran after the gateway failed: mcp-sidecar-start-results.json exists")
	}
	if b, err := os.ReadFile(filepath.Join(runDir, "mcp-sidecar-logs.json")); err == nil && strings.Contains(string(b), "sidecar listening") {
		t.Errorf("the sidecar was released after the gateway failed: its logs say it listened:\n%s", b)
	}
	if exit, _, ok := m.role("sidecar"); !ok {
		t.Error("the sidecar's container, created and started ahead, is not in the record")
	} else if exit == nil || *exit == 137 {
		t.Errorf("the held sidecar's exit code is %v: a role stopped while held must end at once, not be killed after the stop's grace (137)", fmtExit(exit))
	}
	if exit, _, _ := m.role("agent"); exit != nil {
		t.Errorf("the agent ran after the gateway failed (exit code %d)", *exit)
	}
	if m.Verdict.OK {
		t.Error("verdict ok after a failed start")
	}
}

func TestHarnessPlantedSymlink(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	victimDir := t.TempDir()
	victim := filepath.Join(victimDir, "victim")
	if err := os.WriteFile(victim, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := hxSleeper(t, id, runsDir, "--timeout", "8s")
	c.WaitFor(t, "[agent    ]", 3*time.Minute)
	runDir := hxOnlyRun(t, runsDir)
	out := filepath.Join(runDir, "agent")
	// What a hostile workload could leave in its own output directory.
	plants := map[string]string{"answer.txt": victim, "report.json": "/etc/passwd", "done.json": victimDir, "agent-turns.jsonl": "../run-metadata.json"}
	for name, target := range plants {
		if err := os.Symlink(target, filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(out, "status.ndjson"), 0o644); err != nil {
		t.Fatal(err)
	}
	hxWait(t, c, 2*time.Minute)
	RequireNothingLeft(t, label)
	if b, _ := os.ReadFile(victim); string(b) != "host secret\n" {
		t.Errorf("the file outside the run changed: %q", b)
	}
	if entries, _ := os.ReadDir(victimDir); len(entries) != 1 {
		t.Errorf("files appeared next to the victim: %d entries", len(entries))
	}
	for name := range plants {
		if _, err := os.Lstat(filepath.Join(runDir, name)); err == nil {
			t.Errorf("%s was copied into the run directory through a planted link", name)
		}
	}
	m := hxReadMeta(t, runDir)
	if len(m.ArtifactProblems) < len(plants)+1 {
		t.Errorf("artifact_problems %v: want one per planted file", m.ArtifactProblems)
	}
}

func TestHarnessTwentyRuns(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	imagesBefore := hxImageCount(t)
	for i := 0; i < 20; i++ {
		c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--quiet", "--runs-dir", runsDir)
		if code != 0 {
			t.Fatalf("run %d exited %d; stderr:\n%s", i+1, code, c.Stderr.String())
		}
		RequireNothingLeft(t, label)
	}
	entries, _ := os.ReadDir(runsDir)
	if len(entries) != 20 {
		t.Errorf("%d run directories, want 20 (one per run)", len(entries))
	}
	if after := hxImageCount(t); after > imagesBefore+1 {
		t.Errorf("images grew from %d to %d over 20 runs of one binary", imagesBefore, after)
	}
}

func hxImageCount(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("docker", "images", "-q", "--filter", "reference=mcpsidecar").Output()
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(string(out)))
}

func TestHarnessKeepAndJSON(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--keep", "--json", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor --keep exited %d; stderr:\n%s", code, c.Stderr.String())
	}
	var sum struct {
		RunID    string `json:"run_id"`
		RunDir   string `json:"run_dir"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(c.Stdout.Bytes(), &sum); err != nil || sum.RunID == "" || sum.ExitCode != 0 {
		t.Fatalf("--json summary %q: %v", c.Stdout.String(), err)
	}
	cs, ns := Leftovers(t, label)
	if len(cs) != 3 || len(ns) != 2 {
		t.Fatalf("--keep kept %d containers and %d networks, want 3 and 2", len(cs), len(ns))
	}
	_, after, ok := strings.Cut(c.Stderr.String(), "remove it with:\n")
	if !ok {
		t.Fatalf("no removal command printed:\n%s", c.Stderr.String())
	}
	removal := strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
	if out, err := exec.Command("sh", "-c", removal).CombinedOutput(); err != nil {
		t.Fatalf("the printed command %q failed: %v\n%s", removal, err, out)
	}
	RequireNothingLeft(t, label)
}

// readRunMetadata reads a run directory's run-metadata.json as the
// product writes it (runs.Metadata).
func readRunMetadata(t *testing.T, runDir string) runs.Metadata {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, runs.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	var m runs.Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// fmtExit is an exit code for a message: the number, or "none".
func fmtExit(code *int) string {
	if code == nil {
		return "none"
	}
	return strconv.Itoa(*code)
}
