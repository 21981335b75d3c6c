//go:build docker

package e2e

// OpenTelemetry export (issue 33) against a real collector: Jaeger's
// all-in-one binary (scripts/build-jaeger.sh builds it once per machine)
// on loopback. The offline agent run exports at its end; the test reads
// the trace back through Jaeger's query API.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// jaeger is a running collector: OTLP on http and grpc, the query API.
type jaeger struct{ otlpHTTP, otlpGRPC, query string }

func startJaeger(t *testing.T) jaeger {
	t.Helper()
	out, err := exec.Command("../scripts/build-jaeger.sh").Output()
	if err != nil {
		t.Fatalf("scripts/build-jaeger.sh: %v", err)
	}
	bin := strings.TrimSpace(string(out))
	j := jaeger{otlpHTTP: redteamFreeAddr(t), otlpGRPC: redteamFreeAddr(t), query: redteamFreeAddr(t)}
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}
  telemetry: {metrics: {level: none}, logs: {level: warn}}
extensions:
  jaeger_query: {storage: {traces: mem}, http: {endpoint: "%s"}, grpc: {endpoint: "%s"}}
  jaeger_storage: {backends: {mem: {memory: {max_traces: 1000}}}}
receivers:
  otlp: {protocols: {grpc: {endpoint: "%s"}, http: {endpoint: "%s"}}}
processors: {batch: {}}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
`, j.query, redteamFreeAddr(t), j.otlpGRPC, j.otlpHTTP)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, err := http.Get("http://" + j.query + "/api/services"); err == nil {
			r.Body.Close()
			return j
		}
		if time.Now().After(deadline) {
			t.Fatal("jaeger's query API never answered")
		}
	}
}

type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// trace reads trace id back, waiting for the collector to store it.
func (j jaeger) trace(t *testing.T, id string) ([]jaegerSpan, string) {
	t.Helper()
	return j.traceOf(t, id, 1)
}

// traceOf waits until Jaeger holds at least want spans of trace id (the
// spans sent during a run are queryable before the end's are).
func (j jaeger) traceOf(t *testing.T, id string, want int) ([]jaegerSpan, string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, err := http.Get("http://" + j.query + "/api/traces/" + id)
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			var doc struct {
				Data []struct {
					Spans []jaegerSpan `json:"spans"`
				} `json:"data"`
			}
			if json.Unmarshal(b, &doc) == nil && len(doc.Data) == 1 && len(doc.Data[0].Spans) >= want {
				return doc.Data[0].Spans, string(b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: fewer than %d spans in jaeger after 20 s", id, want)
		}
	}
}

var exportedTrace = regexp.MustCompile(`exported the run as OpenTelemetry trace ([0-9a-f]{32}) \((\d+) spans, (\d+) of them during the run\)`)

func TestOTelExportToJaeger(t *testing.T) {
	NeedDocker(t)
	j := startJaeger(t)
	s := agPrepare(t)
	r := s.runWith(t, "task", "--otlp-endpoint", "http://"+j.otlpHTTP)
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
	}
	m := exportedTrace.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("the run did not say it exported:\n%s", r.stderr)
	}
	said, _ := strconv.Atoi(m[2])
	spans, raw := j.traceOf(t, m[1], said)
	byID := map[string]jaegerSpan{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	parent := func(sp jaegerSpan) string {
		for _, ref := range sp.References {
			if ref.RefType == "CHILD_OF" {
				return byID[ref.SpanID].OperationName
			}
		}
		return ""
	}
	var root, chat, learn bool
	for _, sp := range spans {
		switch {
		case sp.OperationName == "mcpsidecar run" && parent(sp) == "":
			root = true
		case strings.HasPrefix(sp.OperationName, "chat "):
			tags := map[string]any{}
			for _, tg := range sp.Tags {
				tags[tg.Key] = tg.Value
			}
			chat = chat || (tags["gen_ai.operation.name"] == "chat" && tags["gen_ai.request.model"] != nil && parent(sp) == "mcpsidecar run")
		case strings.HasPrefix(sp.OperationName, "egress allow CONNECT "+agLearnHost):
			learn = learn || strings.HasPrefix(parent(sp), "tools/call ")
		}
	}
	if !root || !chat || !learn {
		t.Errorf("trace shape: root %v, model span with GenAI attributes %v, Learn request under its tool call %v", root, chat, learn)
	}
	if strings.Contains(raw, s.key) {
		t.Error("the trace holds the model key")
	}
	t.Logf("trace %s: %d spans in jaeger (%s said)", m[1], len(spans), m[2])
}

// TestOTelCollectorDown: a collector that is not there costs the run at
// most the bounded flush, and never its exit.
func TestOTelCollectorDown(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	r := s.runWith(t, "direct", "--question", "What is the capital of France?", "--otlp-endpoint", "http://"+redteamFreeAddr(t))
	if r.err != nil {
		t.Fatalf("mcpsidecar run with the collector down: %v\nstdout:\n%s", r.err, r.stdout)
	}
	if !strings.Contains(r.stderr, "warning: OpenTelemetry export:") {
		t.Errorf("no warning about the export:\n%s", r.stderr)
	}
	t.Logf("run with the collector down took %s", r.wall)
}
