package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
	"github.com/mcpsidecar/mcpsidecar/internal/cli"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// The producer/consumer contract over a run directory (timeline's
// TestProducersContract is the model): every artifact is written by its
// producer's own writer, most by the producer actually running (the agent
// against a fake model and the real sidecar, in process), and read back
// by every consumer: the host's verdict, runs.ReadMetadata, the timeline,
// and the CLI's `runs show --json` and `report show --json`. A name or a
// field renamed on either side fails here. The field-by-field check of
// each wire type is testutil.WireFieldsCovered, run by the consumers'
// own tests.

const contractKey = "sk-contract-fake-key-0123456789" // fake: never a real key

// contractRun is what the producers left in a run directory.
type contractRun struct {
	dir      *runs.Dir
	searchID string // the correlation id of the agent's code-sample search
}

func TestArtifactsContract(t *testing.T) {
	runsDir := t.TempDir()
	r := produceRun(t, runsDir)

	if rc := verdict.CheckRun(r.dir.Path, ""); !rc.OK {
		t.Errorf("verdict.CheckRun: %+v", rc.Checks)
	}
	m, err := runs.ReadMetadata(r.dir.Path)
	if err != nil || m.RunID != r.dir.ID || len(m.Containers) != 3 {
		t.Fatalf("runs.ReadMetadata = %+v, %v; want run %s with 3 containers", m, err, r.dir.ID)
	}
	checkTimeline(t, r)
	checkRunsShow(t, runsDir, r)
	checkReportShow(t, r)
}

// produceRun writes a run directory with each producer's own writer.
func produceRun(t *testing.T, runsDir string) contractRun {
	t.Helper()
	start := time.Now().UTC().Add(-time.Minute)
	d, err := runs.Create(runsDir, start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	r := contractRun{dir: d}
	writeSpecArtifacts(t, d)
	stdout := runAgent(t, d.Path)
	if err := d.Write(runs.FileStdout, stdout); err != nil {
		t.Fatal(err)
	}
	for _, tr := range readTurns(t, d.Path) {
		if tr.Kind == agent.KindToolCall && tr.Tool == agent.ToolCodeSampleSearch {
			r.searchID = tr.CorrelationID
		}
	}
	if r.searchID == "" {
		t.Fatalf("the agent recorded no %s call", agent.ToolCodeSampleSearch)
	}
	writeDecisions(t, d, r.searchID)
	writeProbeReport(t, d)
	writeMetadata(t, d, start)
	return r
}

// writeSpecArtifacts writes what the host writes before anything starts:
// spec.Artifacts of the default spec (gateway-policy.json among them).
func writeSpecArtifacts(t *testing.T, d *runs.Dir) {
	t.Helper()
	s, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	arts, err := spec.Artifacts(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := arts[runs.FileGatewayPolicy]; !ok {
		t.Fatalf("the default spec's artifacts have no %s", runs.FileGatewayPolicy)
	}
	for name, data := range arts {
		if err := d.Write(name, data); err != nil {
			t.Fatal(err)
		}
	}
}

// runAgent runs the agent (fake model) against the real sidecar (fake
// Learn upstream) with the run directory as both output directories: the
// agent writes answer.txt and agent-turns.jsonl, the sidecar its audit.
func runAgent(t *testing.T, dir string) []byte {
	t.Helper()
	up := httptest.NewServer(learnfake.New(learnfake.Options{}).Handler())
	t.Cleanup(up.Close)
	audit, err := sidecar.OpenAuditLog(filepath.Join(dir, runs.FileAudit))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sidecar.New(sidecar.Config{UpstreamURL: up.URL + "/mcp", Audit: audit, UpstreamTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.CheckUpstream(context.Background()); err != nil {
		t.Fatalf("CheckUpstream: %v", err)
	}
	side := httptest.NewServer(sc.Handler())
	t.Cleanup(side.Close)
	model, err := fakemodel.New(fakemodel.Task, contractKey)
	if err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	env := map[string]string{agent.EnvSidecarURL: side.URL + sidecar.MCPPath, agent.EnvBaseURL: ms.URL + "/v1", agent.EnvAPIKey: contractKey}
	cfg, err := agent.LoadConfig(agent.Options{OutputDir: dir, RequestTimeout: 10 * time.Second}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := agent.Run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("agent.Run: %v (stderr %q)", err, stderr.String())
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	return stdout.Bytes()
}

func readTurns(t *testing.T, dir string) []agent.Turn {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, runs.FileAgentTurns))
	if err != nil {
		t.Fatal(err)
	}
	var out []agent.Turn
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var tr agent.Turn
		if err := json.Unmarshal(line, &tr); err != nil {
			t.Fatalf("%s line %q: %v", runs.FileAgentTurns, line, err)
		}
		out = append(out, tr)
	}
	return out
}

// writeDecisions writes the gateway's decision for the search's upstream
// request with egress's own log, as the gateway does.
func writeDecisions(t *testing.T, d *runs.Dir, id string) {
	t.Helper()
	var buf bytes.Buffer
	l := egress.NewDecisionLog(&buf)
	now := time.Now().UTC()
	for _, dec := range []egress.Decision{
		{Time: now, RunID: d.ID, Client: "172.30.0.3:40000", Method: "CONNECT", Host: "learn.microsoft.com", Port: 443,
			ResolvedIP: "192.0.2.10", Decision: egress.Allow, Rule: ".microsoft.com", BytesUp: 10, BytesDown: 20, DurationMS: 5, CorrelationID: id},
		{Time: now, RunID: d.ID, Client: "172.30.0.4:40001", Method: "CONNECT", Host: "evil.example", Port: 443,
			Decision: egress.Deny, Reason: "not in allowed_domains"},
	} {
		if err := l.Record(dec); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Write(runs.FileDecisions, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	// The host's record of the sidecar's start (internal/sandbox writes
	// it as the sidecar starts): its address tells the timeline that the
	// first decision is the sidecar's, so it may hang from the call.
	started := []map[string]any{{"role": "sidecar", "ip_addresses": map[string]string{d.ID + "-internal": "172.30.0.3"}, "ok": true}}
	if err := d.WriteJSON(runs.StartResultsFile("sidecar"), started); err != nil {
		t.Fatal(err)
	}
}

// writeProbeReport writes a one-probe report with the probe's encoder.
func writeProbeReport(t *testing.T, d *runs.Dir) {
	t.Helper()
	c := probe.Capability{ID: "T01", Title: "metadata", Tool: probe.Result{Outcome: probe.Denied},
		Expected: "Denied", Verdict: probe.Pass, VerdictReason: "refused"}
	rep := &probe.Report{Groups: []probe.Group{{ID: "G01", Title: "Network", Capabilities: []probe.Capability{c}}}}
	data, err := rep.Encode(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(runs.FileProbeReport, data); err != nil {
		t.Fatal(err)
	}
}

// writeMetadata writes run-metadata.json as the host does (runs.Metadata,
// indented; the agent's exit code in its container).
func writeMetadata(t *testing.T, d *runs.Dir, start time.Time) {
	t.Helper()
	exit0 := 0
	meta := runs.Metadata{Schema: runs.MetadataSchema, RunID: d.ID, Command: "run", Started: start, Finished: time.Now().UTC(),
		Containers: []runs.Container{{Role: "gateway", Name: "egress-gateway-" + d.ID, ExitCode: &exit0},
			{Role: "sidecar", Name: "mcp-sidecar-" + d.ID, ExitCode: &exit0}, {Role: "agent", Name: "sandbox-agent-" + d.ID, ExitCode: &exit0}},
		Phases:      []runs.Phase{{Name: "wait", Start: start, DurationMS: 1000, OK: true}},
		Verdict:     runs.Verdict{OK: true, Checks: []runs.Check{{Name: verdict.CheckAgentExit, OK: true, Detail: "want 0, got 0"}}},
		Credentials: []runs.Credential{{Variable: agent.EnvAPIKey, Host: "api.openai.com", Lives: spec.LivesGateway}}}
	if err := d.WriteJSON(runs.MetadataFile, meta); err != nil {
		t.Fatal(err)
	}
}

// checkTimeline: the join reads every source and links the gateway's
// decision to the sidecar call that caused it.
func checkTimeline(t *testing.T, r contractRun) {
	t.Helper()
	tl, err := timeline.Build(r.dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Problems) != 0 {
		t.Errorf("timeline problems: %v", tl.Problems)
	}
	if tl.RunID != r.dir.ID || tl.Command != "run" || len(tl.Containers) != 3 || len(tl.Phases) != 1 || tl.Verdict == nil || !tl.Verdict.OK {
		t.Errorf("run metadata not read whole: run %q command %q, %d containers, %d phases, verdict %+v", tl.RunID, tl.Command, len(tl.Containers), len(tl.Phases), tl.Verdict)
	}
	if tl.Policy == nil || !slices.Contains(tl.Policy.AllowedDomains, ".microsoft.com") {
		t.Errorf("gateway policy not read: %+v", tl.Policy)
	}
	if len(tl.Credentials) != 1 || tl.Credentials[0].Lives != timeline.CredentialInGateway {
		t.Errorf("credentials %+v, want one held by the gateway", tl.Credentials)
	}
	if tl.Probe == nil || len(tl.Probe.Groups) != 1 {
		t.Errorf("probe report not read: %+v", tl.Probe)
	}
	kinds := map[string]*timeline.Event{}
	for i := range tl.Events {
		e := &tl.Events[i]
		if e.Kind == timeline.KindToolCall && e.CorrelationID == r.searchID || e.Kind != timeline.KindToolCall && kinds[e.Kind] == nil {
			kinds[e.Kind] = e
		}
	}
	for _, k := range []string{timeline.KindModelRequest, timeline.KindAgentToolCall, timeline.KindAnswerSaved, timeline.KindToolCall,
		timeline.KindResourceRead, timeline.KindEgress, timeline.KindRunStart, timeline.KindRunEnd, timeline.KindPhase} {
		if kinds[k] == nil {
			t.Errorf("no %s event: a source was not read", k)
		}
	}
	call, model := kinds[timeline.KindToolCall], kinds[timeline.KindModelRequest]
	if call != nil && (call.Name != agent.ToolCodeSampleSearch || call.SessionID == "" || len(call.Arguments) == 0 || call.ResultPreview == "" || !call.OK) {
		t.Errorf("tool call event %+v: want name, session, arguments, preview and ok from the audit", call)
	}
	if model != nil && (model.Model == "" || len(model.ToolsRequested) == 0 || model.Turn == 0) {
		t.Errorf("model request event %+v: want model, tools requested and turn from agent-turns.jsonl", model)
	}
	var allowed *timeline.Event
	for i := range tl.Events {
		if e := &tl.Events[i]; e.Kind == timeline.KindEgress && e.Decision == "allow" {
			allowed = e
		}
	}
	switch {
	case allowed == nil || call == nil:
	case allowed.Parent != call.Seq || allowed.LinkedBy != timeline.LinkCorrelation:
		t.Errorf("egress parent %d linked by %q, want the search call %d by correlation id", allowed.Parent, allowed.LinkedBy, call.Seq)
	case allowed.Host != "learn.microsoft.com" || allowed.Port != "443" || allowed.Rule == "" || allowed.ResolvedIP == "" || allowed.BytesDown == 0:
		t.Errorf("egress event %+v: want host, port, rule, resolved ip and bytes from the decision log", allowed)
	}
}

// checkRunsShow: `runs show --json` finds the run and carries its
// metadata and timeline.
func checkRunsShow(t *testing.T, runsDir string, r contractRun) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"runs", "show", r.dir.ID, "--runs-dir", runsDir, "--json"}, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 0 {
		t.Fatalf("runs show --json = %d, stderr %s", code, errb.String())
	}
	var doc struct {
		Run struct {
			ID       string `json:"id"`
			Metadata *struct {
				Command string `json:"command"`
				Verdict struct {
					OK bool `json:"ok"`
				} `json:"verdict"`
			} `json:"metadata"`
		} `json:"run"`
		Timeline struct {
			RunID  string            `json:"run_id"`
			Events []json.RawMessage `json:"events"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("runs show --json: %v\n%s", err, out.String())
	}
	switch m := doc.Run.Metadata; {
	case m == nil || m.Command != "run" || !m.Verdict.OK:
		t.Errorf("runs show --json: run %s metadata %+v, want command run and verdict ok", doc.Run.ID, m)
	case doc.Run.ID != r.dir.ID || doc.Timeline.RunID != r.dir.ID || len(doc.Timeline.Events) == 0:
		t.Errorf("runs show --json: run %s, timeline run %q with %d events", doc.Run.ID, doc.Timeline.RunID, len(doc.Timeline.Events))
	}
}

// checkReportShow: `report show --json` reads the probe's report.json from
// the run directory.
func checkReportShow(t *testing.T, r contractRun) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"report", "show", r.dir.Path, "--json"}, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 0 {
		t.Fatalf("report show --json = %d, stderr %s", code, errb.String())
	}
	var doc struct {
		Probes int               `json:"probes"`
		Counts map[string]int    `json:"counts"`
		Groups []json.RawMessage `json:"groups"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("report show --json: %v\n%s", err, out.String())
	}
	if doc.Probes != 1 || doc.Counts[string(probe.Pass)] != 1 || len(doc.Groups) != 1 {
		t.Errorf("report show --json: %s", out.String())
	}
}
