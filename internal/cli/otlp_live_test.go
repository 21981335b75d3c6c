package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/otelexport"
	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestRelayPollSendsTheSpoolRedacted: the live export reads the gateway's
// spool as it grows and hands each line, with the host's secrets
// removed, to the relay, which sends it to the collector during the run;
// a line read once is not handed over again.
func TestRelayPollSendsTheSpoolRedacted(t *testing.T) {
	var mu sync.Mutex
	var names []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not traces", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					names = append(names, sp.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", otlpwire.ContentProtobuf)
	}))
	defer srv.Close()
	const secret = "sk-live-relay-secret-0123456789"
	line, _ := json.Marshal(egress.RelayLine{Time: time.Now(), Signal: otlpwire.Traces, Items: 1,
		OTLP: json.RawMessage(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"read ` + secret + `"}]}]}]}`)})
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "gateway"), 0o700); err != nil {
		t.Fatal(err)
	}
	spoolPath := filepath.Join(dir, "gateway", runs.FileAgentTelemetry)
	if err := os.WriteFile(spoolPath, append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	relay, err := otelexport.NewLiveRelay(ctx, otelexport.Target{Endpoint: srv.URL}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	spool := spoolLines(dir)
	redact := hostSecrets([]string{"OPENAI_API_KEY=" + secret})
	relayPoll(spool, relay, redact)
	relayPoll(spool, relay, redact) // nothing new
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(names)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spooled span never reached the collector (last error %v)", relay.Err())
		}
	}
	if skip := relay.Finish(ctx); !skip(1) {
		t.Error("line 1 was taken by the collector but is not skipped at the end")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) != 1 || strings.Contains(names[0], secret) || !strings.HasPrefix(names[0], "read ") {
		t.Errorf("collector got spans %q; want one, without the host's secret", names)
	}
}

// TestForwardWarningCountsEveryRequest: when the collector takes none of
// the relayed requests, the warning counts all of them, says they are
// kept, and gives the command that sends them again (red team, session
// 38: it said "0 of 1 requests sent" for a spool of many once the bound
// ran out).
func TestForwardWarningCountsEveryRequest(t *testing.T) {
	line, _ := json.Marshal(egress.RelayLine{Time: time.Now(), Signal: otlpwire.Traces, Items: 1,
		OTLP: json.RawMessage(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"act"}]}]}]}`)})
	dir := t.TempDir()
	spool := strings.Repeat(string(line)+"\n", 5)
	if err := os.WriteFile(filepath.Join(dir, runs.FileAgentTelemetry), []byte(spool), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused", http.StatusBadRequest)
	}))
	defer srv.Close()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	forwardAgentTelemetry(ctx, &out, dir, otelexport.Target{Endpoint: srv.URL}, false, nil)
	got := out.String()
	for _, want := range []string{"warning: OpenTelemetry export of the agent's own telemetry: agent-telemetry.jsonl line 1: ", "(4 more failed)",
		"0 of the 5 requests the gateway relayed reached the collector (0 during the run); all 5 are kept in the run directory: mcpsidecar runs export " + dir + " sends them again"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
