//go:build docker

package e2e

// The relay of an agent's own telemetry (issue 33, item 4), against a
// loopback OTLP/HTTP receiver that decodes what it gets with the
// protocol's published protobuf types: a workload that emits
// OpenTelemetry spans with the SDK's OTLP/HTTP exporter (x-otlp), run
// with agent_telemetry = true, sends them to the gateway's relay; the
// decision log has a line for each request, the run directory keeps the
// payloads, and the host sends them to the receiver under the run's
// trace, beside the run's own spans; a workload that keeps sending has
// its spans at the receiver (and in Jaeger) while the run goes, each
// once. Run once more without
// agent_telemetry: the same workload's OTLP is refused and recorded, and
// nothing of it reaches the receiver.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/otelexport"
)

// relaySpan is one span a receiver got, and when.
type relaySpan struct {
	trace, id, parent, name string
	at                      time.Time
}

// spanReceiver is a loopback OTLP/HTTP traces receiver keeping every span.
type spanReceiver struct {
	mu     sync.Mutex
	spans  []relaySpan
	bodies [][]byte
}

// got reports whether any request's body held s.
func (o *spanReceiver) got(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.bodies {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

func (o *spanReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an ExportTraceServiceRequest on /v1/traces", http.StatusBadRequest)
		return
	}
	now := time.Now()
	o.mu.Lock()
	o.bodies = append(o.bodies, body)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				o.spans = append(o.spans, relaySpan{hex.EncodeToString(sp.TraceId), hex.EncodeToString(sp.SpanId), hex.EncodeToString(sp.ParentSpanId), sp.Name, now})
			}
		}
	}
	o.mu.Unlock()
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// of is the spans of trace id.
func (o *spanReceiver) of(id string) []relaySpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []relaySpan
	for _, s := range o.spans {
		if s.trace == id {
			out = append(out, s)
		}
	}
	return out
}

type relayRun struct {
	dir, stdout, stderr string
	err                 error
	decisions           []map[string]any
}

// relayRunSpec runs workload (x-otlp and its flags, comma-separated)
// under spec, exporting to the collector at otlp.
func relayRunSpec(t *testing.T, bin, dir, spec, workload, otlp string) relayRun {
	t.Helper()
	id := RandHex(6)
	runsDir := filepath.Join(dir, "runs-"+id)
	specFile := filepath.Join(dir, "spec-"+id+".toml")
	if err := os.WriteFile(specFile, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--spec", specFile, "--runs-dir", runsDir, "--allow-old-engine", "--timeout", "90s",
		"--x-workload-cmd", workload, "--otlp-endpoint", "http://"+otlp)
	cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+id)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	r := relayRun{err: cmd.Run(), stdout: out.String(), stderr: errb.String()}
	runs, _ := filepath.Glob(filepath.Join(runsDir, "run-*"))
	if len(runs) != 1 {
		t.Fatalf("want one run directory in %s, got %v\nstderr:\n%s", runsDir, runs, r.stderr)
	}
	r.dir = runs[0]
	r.decisions = relayDecisions(t, r.dir)
	return r
}

// relayDecisions reads the run's decision log.
func relayDecisions(t *testing.T, runDir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, "egress-decisions.jsonl"))
	if err != nil {
		t.Fatalf("the run has no decision log: %v", err)
	}
	defer f.Close()
	var out []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var d map[string]any
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("decision line %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

const relaySpec = "schema_version = 1\ncapabilities = [\"network\"]\nagent_telemetry = true\n"

func TestAgentTelemetryRelay(t *testing.T) {
	NeedDocker(t)
	bin := BinaryWithTestCommands(t)
	rcv := &spanReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	otlp := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	t.Cleanup(func() { agRemoveRunImages(dir) })

	t.Run("asked", func(t *testing.T) {
		// The workload puts a secret the host forwarded it into its
		// spans: the record, the gateway's folder included, and the
		// collector get its redaction.
		const secret = "relay-secret-0123456789abcdef"
		t.Setenv("RELAY_TOKEN", secret)
		spec := relaySpec + "\n[[environment_variables]]\nname = \"RELAY_TOKEN\"\nfrom_host = true\n"
		r := relayRunSpec(t, bin, dir, spec, "x-otlp,--spans,3,--attribute-env,RELAY_TOKEN", otlp)
		agCheckNoSecret(t, r.dir, secret)
		if rcv.got(secret) {
			t.Error("the collector got the secret")
		}
		if raw, err := os.ReadFile(filepath.Join(r.dir, "gateway", "agent-telemetry.jsonl")); err != nil || !strings.Contains(string(raw), "<redacted>") {
			t.Errorf("gateway/agent-telemetry.jsonl (%v) has no redacted value: the workload's attribute never carried the secret", err)
		}
		if !strings.Contains(r.stdout, "x-otlp: 3 spans sent") {
			t.Fatalf("the workload did not send its spans (run: %v)\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
		}
		relayed := 0
		for _, d := range r.decisions {
			if d["rule"] == "agent_telemetry relay" && d["decision"] == "allow" && d["path"] == "/v1/traces" && d["port"] == float64(4318) {
				relayed++
			}
		}
		if relayed != 3 {
			t.Errorf("%d relay decision lines, want 3 (one per request):\n%v", relayed, r.decisions)
		}
		spool, err := os.ReadFile(filepath.Join(r.dir, "agent-telemetry.jsonl"))
		if err != nil || strings.Count(string(spool), "\n") != 3 {
			t.Errorf("agent-telemetry.jsonl: %v, %d lines, want 3", err, strings.Count(string(spool), "\n"))
		}
		if !strings.Contains(r.stderr, "sent the agent's own telemetry: 3 requests (3 items) relayed by the gateway") {
			t.Errorf("the host did not say it sent the relayed telemetry:\n%s", r.stderr)
		}
		m := exportedTrace.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("the run did not say it exported:\n%s", r.stderr)
		}
		// The run's spans and the workload's three, in one trace, the
		// workload's under the run's root span.
		spans := rcv.of(m[1])
		byID := map[string]relaySpan{}
		for _, sp := range spans {
			byID[sp.id] = sp
		}
		steps := 0
		for _, sp := range spans {
			if p, ok := byID[sp.parent]; ok && strings.HasPrefix(sp.name, "agent step ") && strings.HasPrefix(p.name, "mcpsidecar run") && p.parent == "" {
				steps++
			}
		}
		if steps != 3 {
			t.Errorf("%d of the workload's spans under the run's span at the receiver, want 3: %v", steps, spans)
		}
		t.Logf("trace %s: %d spans received; the run's exit: %v", m[1], len(spans), r.err)
	})

	t.Run("live", func(t *testing.T) {
		r := relayRunSpec(t, bin, dir, relaySpec, fmt.Sprintf("x-otlp,--spans,%d,--every,%s", relayLive, relayEvery), otlp)
		liveRelay(t, r, rcv)
	})

	t.Run("live to jaeger", func(t *testing.T) { relayToJaeger(t, bin, dir) })

	t.Run("not asked", func(t *testing.T) {
		spec := "schema_version = 1\ncapabilities = [\"network\"]\n\n[[environment_variables]]\nname = \"OTEL_EXPORTER_OTLP_ENDPOINT\"\nvalue = \"http://egress-gateway:4318\"\n"
		r := relayRunSpec(t, bin, dir, spec, "x-otlp,--spans,3", otlp)
		if strings.Contains(r.stdout, "spans sent") {
			t.Errorf("the workload's export succeeded without agent_telemetry:\n%s", r.stdout)
		}
		refused := 0
		for _, d := range r.decisions {
			if d["decision"] == "deny" && d["host"] == "egress-gateway" && d["port"] == float64(4318) && d["method"] == "POST" && d["reason"] != "" {
				refused++
				t.Logf("refused: %v", d["reason"])
			}
			if d["rule"] == "agent_telemetry relay" {
				t.Errorf("a relay line without agent_telemetry: %v", d)
			}
		}
		if refused == 0 {
			t.Errorf("the workload's OTLP has no refusal in the decision log:\n%v", r.decisions)
		}
		if _, err := os.Stat(filepath.Join(r.dir, "agent-telemetry.jsonl")); err == nil {
			t.Error("agent-telemetry.jsonl exists without agent_telemetry")
		}
		m := exportedTrace.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("the run did not say it exported:\n%s", r.stderr)
		}
		spans := rcv.of(m[1])
		if len(spans) == 0 {
			t.Errorf("the run's own trace %s never reached the receiver", m[1])
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for _, sp := range rcv.spans {
			if strings.HasPrefix(sp.name, "agent step ") && sp.trace == m[1] {
				t.Errorf("the workload's span %q reached the receiver", sp.name)
			}
		}
	})
}

// sentLine is the host's line saying what it sent of the relayed telemetry.
var sentLine = regexp.MustCompile(`sent the agent's own telemetry: [^\n]*`)

// relayLive is how many spans the "live" run sends, one request each,
// one every relayEvery.
const (
	relayLive  = 50
	relayEvery = "100ms"
)

// liveRelay checks the "live" run: each of the workload's spans reaches
// the receiver once, and some before the workload sent its last one (so
// while the run went, not at its end). It logs the delay from each
// payload's decision line to the receiver getting it.
func liveRelay(t *testing.T, r relayRun, rcv *spanReceiver) {
	t.Helper()
	if !strings.Contains(r.stdout, fmt.Sprintf("x-otlp: %d spans sent", relayLive)) {
		t.Fatalf("the workload did not send its spans (run: %v)\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	var decided []time.Time
	for _, d := range r.decisions {
		if d["rule"] == "agent_telemetry relay" && d["decision"] == "allow" {
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d["time"]))
			if err != nil {
				t.Fatalf("relay decision time %v: %v", d["time"], err)
			}
			decided = append(decided, at)
		}
	}
	if len(decided) != relayLive {
		t.Fatalf("%d relay decision lines, want %d", len(decided), relayLive)
	}
	m := exportedTrace.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("the run did not say it exported:\n%s", r.stderr)
	}
	got := map[string][]time.Time{}
	for _, sp := range rcv.of(m[1]) {
		got[sp.name] = append(got[sp.name], sp.at)
	}
	var delays []time.Duration
	early := 0
	for i := range relayLive {
		name := fmt.Sprintf("agent step %d", i)
		if len(got[name]) != 1 {
			t.Errorf("%q reached the receiver %d times, want once", name, len(got[name]))
			continue
		}
		if got[name][0].Before(decided[relayLive-1]) {
			early++
		}
		delays = append(delays, got[name][0].Sub(decided[i]))
	}
	if early == 0 {
		t.Errorf("none of the workload's spans reached the receiver before its last request was decided (%v): sent at the end only", decided[relayLive-1])
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("sent the agent's own telemetry: %d requests (%d items)", relayLive, relayLive)) || strings.Contains(r.stderr, "gateway, 0 requests during the run") {
		t.Errorf("the host did not say it sent the relayed telemetry during the run:\n%s", r.stderr)
	}
	slices.Sort(delays)
	if len(delays) > 0 {
		t.Logf("relayed payloads: %d; %d reached the receiver before the last was decided; delay from decision line to receiver: median %v, max %v; the host: %q",
			len(delays), early, delays[len(delays)/2], delays[len(delays)-1], sentLine.FindString(r.stderr))
	}
}

// relayToJaeger runs the "live" workload against Jaeger, reading Jaeger
// while the run goes: a relayed span must be queryable there before the
// run ends, and after it each of the workload's spans is there once.
func relayToJaeger(t *testing.T, bin, dir string) {
	j := startJaeger(t) // otel_test.go
	id := RandHex(6)
	runsDir := filepath.Join(dir, "runs-"+id)
	specFile := filepath.Join(dir, "spec-"+id+".toml")
	if err := os.WriteFile(specFile, []byte(relaySpec), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--spec", specFile, "--runs-dir", runsDir, "--allow-old-engine", "--timeout", "90s",
		"--x-workload-cmd", fmt.Sprintf("x-otlp,--spans,%d,--every,%s", relayLive, relayEvery), "--otlp-endpoint", "http://"+j.otlpHTTP)
	cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+id)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var traceID string
	var during time.Time // when Jaeger first held a relayed span, the run still going
	var runErr error
watch:
	for {
		select {
		case runErr = <-done:
			break watch
		case <-time.After(200 * time.Millisecond):
		}
		if traceID == "" {
			if runs, _ := filepath.Glob(filepath.Join(runsDir, "run-*")); len(runs) == 1 {
				traceID = strings.Split(otelexport.RunTraceParent(filepath.Base(runs[0])), "-")[1]
			}
			continue
		}
		if during.IsZero() && len(jaegerSteps(j, traceID)) > 0 {
			during = time.Now()
		}
	}
	if traceID == "" {
		t.Fatalf("no run directory appeared (run: %v)\nstderr:\n%s", runErr, errb.String())
	}
	if during.IsZero() {
		t.Errorf("no relayed span was in jaeger before the run ended (run: %v)\nstderr:\n%s", runErr, errb.String())
	}
	var steps map[string]int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if steps = jaegerSteps(j, traceID); len(steps) == relayLive {
			break
		}
	}
	for i := range relayLive {
		if n := steps[fmt.Sprintf("agent step %d", i)]; n != 1 {
			t.Errorf("agent step %d is in jaeger %d times, want once", i, n)
		}
	}
	t.Logf("trace %s: a relayed span in jaeger during the run (%v); %d of the workload's spans in jaeger after", traceID, !during.IsZero(), len(steps))
}

// jaegerSteps counts the workload's spans ("agent step N") that Jaeger
// holds of trace id, by name.
func jaegerSteps(j jaeger, id string) map[string]int {
	steps := map[string]int{}
	r, err := http.Get("http://" + j.query + "/api/traces/" + id)
	if err != nil {
		return steps
	}
	defer r.Body.Close()
	var doc struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if json.NewDecoder(r.Body).Decode(&doc) != nil || len(doc.Data) != 1 {
		return steps
	}
	for _, sp := range doc.Data[0].Spans {
		if strings.HasPrefix(sp.OperationName, "agent step ") {
			steps[sp.OperationName]++
		}
	}
	return steps
}
