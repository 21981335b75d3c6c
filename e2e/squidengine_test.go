//go:build docker

package e2e

// The harness with Squid as the egress gateway (--gateway-engine squid):
// the image scripts/build-squid-image.sh builds from the host's Debian
// package, doctor's full lifecycle through it, the probe suite through
// both engines held to the same verdicts, and the refusal to run (never
// pull) when the image is not on the engine. No traffic leaves the
// machine: every request is to a .invalid name or a refused literal.

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// sqImage is the tag the docs name. The test builds it and keeps it: it
// is the shared local build (rebuilding is idempotent), which a
// concurrent run of another test may be using.
const sqImage = "mcpsidecar-squid:local"

var (
	sqOnce sync.Once
	sqErr  error
	sqOut  []byte
)

// sqBuildImage builds sqImage with the repository's script, once per
// test process.
func sqBuildImage(t *testing.T) {
	t.Helper()
	NeedDocker(t)
	sqOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(filepath.Dir(file)), "scripts", "build-squid-image.sh")
		cmd := exec.Command("bash", script, sqImage)
		cmd.Env = append(os.Environ(), "MCPSIDECAR_IMAGE_LABELS="+TestLabel)
		sqOut, sqErr = cmd.CombinedOutput()
	})
	if sqErr != nil {
		t.Fatalf("building %s with scripts/build-squid-image.sh (needs Debian's squid: apt-get install -y squid): %v\n%s", sqImage, sqErr, sqOut)
	}
}

// sqMeta is the part of run-metadata.json these tests read beyond hxMeta.
type sqMeta struct {
	Gateway *struct {
		Engine string `json:"engine"`
		Image  string `json:"image"`
	} `json:"gateway"`
}

func sqReadJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
}

// sqDecision is the part of a decision line these tests compare.
type sqDecision struct {
	RunID         string `json:"run_id"`
	Method        string `json:"method"`
	Host          string `json:"host"`
	Port          int    `json:"port"`
	Decision      string `json:"decision"`
	Reason        string `json:"reason"`
	CorrelationID string `json:"correlation_id"`
}

func sqDecisions(t *testing.T, runDir string) []sqDecision {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "egress-decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sqDecision
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var d sqDecision
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("egress-decisions.jsonl: %v\n%s", err, b)
		}
		out = append(out, d)
	}
	return out
}

func TestSquidEngineDoctor(t *testing.T) {
	sqBuildImage(t)
	id, runsDir, label := hxSetup(t)
	c, code := RunCLI(t, id, nil, "doctor", "--gateway-engine", "squid", "--squid-image", sqImage, "--allow-old-engine", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor exited %d\nstdout:\n%s\nstderr:\n%s", code, c.Stdout.String(), c.Stderr.String())
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	for _, name := range hxDoctorArtifacts {
		t.Run(name, func(t *testing.T) { hxWellFormed(t, filepath.Join(runDir, name)) })
	}
	for _, row := range []string{"sidecar tools", "answer format", "gateway refuses .invalid", "no route out"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(row) + `\s+ok\s`).MatchString(c.Stdout.String()) {
			t.Errorf("check %q did not pass; stdout:\n%s", row, c.Stdout.String())
		}
	}
	m := hxReadMeta(t, runDir)
	var sm sqMeta
	sqReadJSON(t, filepath.Join(runDir, "run-metadata.json"), &sm)
	if sm.Gateway == nil || sm.Gateway.Engine != "squid" || sm.Gateway.Image != sqImage {
		t.Errorf("run-metadata.json gateway = %+v, want engine squid, image %s", sm.Gateway, sqImage)
	}
	// shutdown_lifetime in squid.conf: Squid exits on the harness's
	// SIGTERM within the grace, not killed.
	if exit, _, ok := m.role("gateway"); !ok || exit == nil || *exit != 0 {
		t.Errorf("gateway exit code %v, want 0 (Squid ends on SIGTERM)", exit)
	}
	if !slices.ContainsFunc(m.Degradations, func(d string) bool { return strings.Contains(d, "gateway engine squid: no in-process hardening") }) {
		t.Errorf("degradations %q lack the Squid hardening one", m.Degradations)
	}
	sqCheckDoctorRecord(t, runDir, m.RunID)
}

// sqCheckDoctorRecord: the check's request to probe.invalid is in the
// converted decision log, denied by Squid, with its trace id, and the raw
// access log is in gateway-logs.json.
func sqCheckDoctorRecord(t *testing.T, runDir, runID string) {
	t.Helper()
	ds := sqDecisions(t, runDir)
	i := slices.IndexFunc(ds, func(d sqDecision) bool { return d.Host == "probe.invalid" })
	if i < 0 {
		t.Fatalf("no decision for probe.invalid in %+v", ds)
	}
	d := ds[i]
	if d.RunID != runID || d.Method != "GET" || d.Port != 80 || d.Decision != "deny" || d.Reason != "squid: TCP_DENIED/403" ||
		!regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(d.CorrelationID) {
		t.Errorf("probe.invalid decision %+v", d)
	}
	var logs struct {
		AccessLog string `json:"access_log"`
		Stderr    string `json:"stderr"`
	}
	sqReadJSON(t, filepath.Join(runDir, "gateway-logs.json"), &logs)
	if !strings.Contains(logs.AccessLog, `"url":"http://probe.invalid/"`) || !strings.Contains(logs.Stderr, "Accepting HTTP Socket connections") {
		t.Errorf("gateway-logs.json: access log %q, stderr tail %q", logs.AccessLog, hxTail(logs.Stderr, 400))
	}
	var start []struct {
		Action string `json:"action"`
		OK     bool   `json:"ok"`
	}
	sqReadJSON(t, filepath.Join(runDir, "gateway-start-results.json"), &start)
	if len(start) != 1 || !start[0].OK || !strings.Contains(start[0].Action, "TCP connect") {
		t.Errorf("gateway-start-results.json %+v", start)
	}
}

// TestSquidEngineTestSandbox runs the probe suite once through each engine
// and holds Squid to the same verdicts as our gateway, probe by probe, and
// to the same requests and decisions in the decision log.
func TestSquidEngineTestSandbox(t *testing.T) {
	sqBuildImage(t)
	reports := map[string][]sqProbe{}
	decisions := map[string][]string{}
	for _, engine := range []string{"ours", "squid"} {
		id, runsDir, label := hxSetup(t)
		c, code := RunCLI(t, id, nil, "test-sandbox", "--gateway-engine", engine, "--squid-image", sqImage, "--allow-old-engine", "--quiet", "--runs-dir", runsDir)
		if code != 0 {
			t.Fatalf("%s: test-sandbox exited %d (4: a violation); stderr tail:\n%s", engine, code, hxTail(c.Stderr.String(), 2000))
		}
		RequireNothingLeft(t, label)
		runDir := hxOnlyRun(t, runsDir)
		reports[engine] = sqProbes(t, filepath.Join(runDir, "report.json"))
		for _, d := range sqDecisions(t, runDir) {
			decisions[engine] = append(decisions[engine], d.Method+" "+sqHost(d.Host)+" "+d.Decision)
		}
		slices.Sort(decisions[engine])
	}
	if len(reports["squid"]) < 100 {
		t.Fatalf("squid report has %d probe outcomes, want the whole suite", len(reports["squid"]))
	}
	if !slices.Equal(reports["ours"], reports["squid"]) {
		for i := range min(len(reports["ours"]), len(reports["squid"])) {
			if reports["ours"][i] != reports["squid"][i] {
				t.Errorf("probe differs: ours %+v, squid %+v", reports["ours"][i], reports["squid"][i])
			}
		}
		t.Errorf("the engines' reports differ (%d vs %d outcomes)", len(reports["ours"]), len(reports["squid"]))
	}
	if len(decisions["squid"]) == 0 || !slices.Equal(decisions["ours"], decisions["squid"]) {
		t.Errorf("decision logs differ:\nours:  %q\nsquid: %q", decisions["ours"], decisions["squid"])
	}
}

// sqHost spells an IPv4-mapped literal as IPv4: Squid logs
// http://[::ffff:169.254.169.254]/ as http://169.254.169.254/ (it keeps
// every IPv4 address mapped internally); our gateway logs what was asked.
func sqHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

// sqProbe is one probe outcome of report.json.
type sqProbe struct {
	ID, Part, Outcome, Verdict string
}

func sqProbes(t *testing.T, path string) []sqProbe {
	t.Helper()
	var groups []struct {
		ID           string                       `json:"id"`
		Capabilities []map[string]json.RawMessage `json:"capabilities"`
	}
	sqReadJSON(t, path, &groups)
	var out []sqProbe
	for _, g := range groups {
		for _, c := range g.Capabilities {
			var id, verdict string
			_ = json.Unmarshal(c["id"], &id)
			_ = json.Unmarshal(c["verdict"], &verdict)
			if g.ID == "G05" && id == "T05" {
				// Model credentials in the environment: our engine gives
				// the agent a per-run placeholder (the gateway holds the
				// key, issue 15); Squid cannot inject one, so the key stays
				// with the host. A known, recorded difference.
				continue
			}
			for _, part := range []string{"shell", "tool", "alternates"} {
				var o struct {
					Outcome string `json:"outcome"`
				}
				if raw, ok := c[part]; ok {
					if err := json.Unmarshal(raw, &o); err != nil {
						t.Fatalf("%s: %s/%s: %v", path, id, part, err)
					}
					out = append(out, sqProbe{ID: id, Part: part, Outcome: o.Outcome, Verdict: verdict})
				}
			}
		}
	}
	return out
}

// TestSquidEngineImageAbsent: an image that is not on the engine is never
// pulled; the command exits 5 before creating anything and says how to
// build one.
func TestSquidEngineImageAbsent(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	absent := "mcpsidecar-squid:absent-" + id
	for _, cmd := range []string{"doctor", "test-sandbox", "run"} {
		t.Run(cmd, func(t *testing.T) {
			c, code := RunCLI(t, id, []string{"OPENAI_API_KEY=sk-e2e-not-used"}, cmd, "--gateway-engine", "squid", "--squid-image", absent,
				"--allow-old-engine", "--runs-dir", runsDir)
			stderr := c.Stderr.String()
			if code != 5 || !strings.Contains(stderr, absent+" is not on this Docker engine") ||
				!strings.Contains(stderr, "scripts/build-squid-image.sh") || !strings.Contains(stderr, "--squid-image "+sqImage) {
				t.Errorf("exit %d, stderr:\n%s\nwant 5 naming the image, the build script and --squid-image %s", code, stderr, sqImage)
			}
			if _, err := os.Stat(runsDir); err == nil {
				t.Errorf("a run directory was created")
			}
		})
	}
	RequireNothingLeft(t, label)
	if out, err := exec.Command("docker", "image", "inspect", absent).CombinedOutput(); err == nil {
		t.Errorf("%s exists after the runs: it was pulled or built (%s)", absent, out)
	}
}

// TestSquidEngineOfflineRun is agent_test.go's offline `run` with Squid as
// the gateway: the agent's model requests (plain HTTP) and the sidecar's
// tool calls (CONNECT to learn.microsoft.com) pass through Squid, every
// decision line converted from its access log is an allow joined to the
// request that caused it by the traceparent, and the run leaves nothing.
func TestSquidEngineOfflineRun(t *testing.T) {
	sqBuildImage(t)
	s := agPrepare(t)
	r := sqAgentRun(t, s, "task")
	if r.err != nil {
		t.Fatalf("mcpsidecar run --gateway-engine squid: %v\nstdout:\n%s", r.err, r.stdout)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	agCheckAnswer(t, runDir, r.stdout)
	search := agCheckAudit(t, runDir)
	agCheckDecisions(t, runDir, search)
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
	var sm sqMeta
	sqReadJSON(t, filepath.Join(runDir, "run-metadata.json"), &sm)
	if sm.Gateway == nil || sm.Gateway.Engine != "squid" {
		t.Errorf("run-metadata.json gateway = %+v, want engine squid", sm.Gateway)
	}
}

// sqAgentRun is agSetup.run with --gateway-engine squid.
func sqAgentRun(t *testing.T, s agSetup, behaviour string) agResult {
	t.Helper()
	return s.runWith(t, behaviour, "--gateway-engine", "squid", "--squid-image", sqImage)
}
