package otelexport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

const (
	spoolTraces  = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"plan"},{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203332","parentSpanId":"b7ad6b7169203331","name":"act"}]}]}]}`
	spoolMetrics = `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"tokens","sum":{"dataPoints":[{"asInt":"7"}]}}]}]}]}`
	spoolLogs    = `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"thinking"}}]}]}]}`
)

// writeSpool writes a run directory whose gateway relayed lines.
func writeSpool(t *testing.T, lines ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, runs.FileAgentTelemetry), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func spoolLine(sig otlpwire.Signal, otlp string) string {
	b, _ := json.Marshal(egress.RelayLine{Time: time.Now(), Signal: sig, OTLP: json.RawMessage(otlp)})
	return string(b)
}

// collector is a loopback OTLP/HTTP receiver decoding what it gets.
type collector struct {
	mu      sync.Mutex
	got     map[string]proto.Message
	headers http.Header
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sig, ok := otlpwire.SignalOf(r.URL.Path)
	if !ok || r.Header.Get("Content-Type") != otlpwire.ContentProtobuf {
		http.Error(w, "not OTLP/HTTP protobuf", http.StatusBadRequest)
		return
	}
	m, err := otlpwire.Decode(sig, body, false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.got[string(sig)], c.headers = m, r.Header.Clone()
	c.mu.Unlock()
	b, _ := proto.Marshal(otlpwire.NewResponse(sig))
	w.Header().Set("Content-Type", otlpwire.ContentProtobuf)
	w.Write(b)
}

// TestForwardAgentTelemetry: every relayed request reaches a collector,
// ids as the workload made them, with the OTLP headers the host set; a
// malformed line is reported by number and the rest still go.
func TestForwardAgentTelemetry(t *testing.T) {
	c := &collector{got: map[string]proto.Message{}}
	srv := httptest.NewServer(c)
	defer srv.Close()
	dir := writeSpool(t, spoolLine(otlpwire.Traces, spoolTraces), `{"signal":"traces","otlp":{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"nothex"}]}]}]}}`,
		spoolLine(otlpwire.Metrics, spoolMetrics), spoolLine(otlpwire.Logs, spoolLogs))
	env := map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-team=blue%20one"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := ForwardAgentTelemetry(ctx, dir, Target{Endpoint: srv.URL}, func(k string) string { return env[k] }, nil)
	if err == nil || !strings.Contains(err.Error(), runs.FileAgentTelemetry+" line 2:") {
		t.Errorf("error %v, want one naming line 2", err)
	}
	if st.Requests != 4 || st.Sent != 3 || st.Items != 4 {
		t.Errorf("stats %+v, want 4 requests, 3 sent, 4 items", st)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tr, _ := c.got["traces"].(*coltrace.ExportTraceServiceRequest)
	if tr == nil || fmt.Sprintf("%x", tr.ResourceSpans[0].ScopeSpans[0].Spans[1].ParentSpanId) != "b7ad6b7169203331" {
		t.Errorf("traces as received: %v", tr)
	}
	if _, ok := c.got["metrics"].(*colmetrics.ExportMetricsServiceRequest); !ok {
		t.Error("no metrics received")
	}
	if _, ok := c.got["logs"].(*collogs.ExportLogsServiceRequest); !ok {
		t.Error("no logs received")
	}
	if c.headers.Get("X-Team") != "blue one" {
		t.Errorf("header X-Team %q, want the host's OTEL_EXPORTER_OTLP_HEADERS value", c.headers.Get("X-Team"))
	}
}

// TestForwardCollectorDownOrSilent: a collector that is not there, or
// that takes the connection and never answers, costs at most the bound
// the caller gives, and is an error, never a hang.
func TestForwardCollectorDownOrSilent(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		silent.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	down, _ := net.Listen("tcp", "127.0.0.1:0")
	downAddr := down.Addr().String()
	down.Close()
	dir := writeSpool(t, spoolLine(otlpwire.Traces, spoolTraces), spoolLine(otlpwire.Metrics, spoolMetrics),
		spoolLine(otlpwire.Logs, spoolLogs), spoolLine(otlpwire.Traces, spoolTraces))
	// What the error says of the four: the first failure by its line,
	// then the others as one count (a down collector refuses each at
	// once; a silent one holds the first until the bound, and the rest
	// are not tried).
	wantErr := map[string]*regexp.Regexp{
		"down":   regexp.MustCompile(`^agent-telemetry\.jsonl line 1: .*\(3 more failed\)$`),
		"silent": regexp.MustCompile(`^agent-telemetry\.jsonl line 1: .*\(3 not tried: context deadline exceeded\)$`),
	}
	for name, addr := range map[string]string{"down": downAddr, "silent": silent.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			const bound = 700 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			start := time.Now()
			st, err := ForwardAgentTelemetry(ctx, dir, Target{Endpoint: "http://" + addr}, func(string) string { return "" }, nil)
			took := time.Since(start)
			if err == nil || st.Sent != 0 {
				t.Fatalf("sent %d with no error to a collector %s", st.Sent, name)
			}
			// Every request is counted, tried or not (red team, session
			// 38: the count stopped at the first line once the bound
			// ran out, and the warning said "0 of 1").
			if st.Requests != 4 || st.Unsent() != 4 {
				t.Errorf("stats %+v, want 4 requests, 4 unsent", st)
			}
			if !wantErr[name].MatchString(err.Error()) {
				t.Errorf("error %q, want it to match %s", err, wantErr[name])
			}
			if took > bound+500*time.Millisecond {
				t.Errorf("took %v with a bound of %v", took, bound)
			}
		})
	}
}

// TestForwardNoSpool: a run that relayed nothing sends nothing.
func TestForwardNoSpool(t *testing.T) {
	st, err := ForwardAgentTelemetry(context.Background(), t.TempDir(), Target{Endpoint: "http://127.0.0.1:1"}, func(string) string { return "" }, nil)
	if err != nil || st.Requests != 0 {
		t.Errorf("got %+v, %v; want nothing", st, err)
	}
}

// TestRunTraceParent: the traceparent given to the agent names the
// trace and the run span that [Export] sends.
func TestRunTraceParent(t *testing.T) {
	tl := basicRun(t)
	exp := keep{tracetest.NewInMemoryExporter()}
	st, err := Export(context.Background(), tl, exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := RunTraceParent(tl.RunID)
	root := ""
	for _, s := range exp.GetSpans() {
		if !s.Parent.IsValid() {
			root = s.SpanContext.SpanID().String()
		}
	}
	if want := "00-" + st.TraceID + "-" + root + "-01"; tp != want {
		t.Errorf("RunTraceParent %q, want %q", tp, want)
	}
}

// countingCollector is a loopback OTLP/HTTP receiver that counts the
// items it takes, by signal and by span name.
type countingCollector struct {
	mu       sync.Mutex
	requests map[string]int
	names    map[string]int
}

func newCountingCollector() *countingCollector {
	return &countingCollector{requests: map[string]int{}, names: map[string]int{}}
}

func (c *countingCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sig, ok := otlpwire.SignalOf(r.URL.Path)
	m, err := otlpwire.Decode(sig, body, false)
	if !ok || err != nil {
		http.Error(w, "not OTLP/HTTP protobuf", http.StatusBadRequest)
		return
	}
	c.add(sig, m)
	b, _ := proto.Marshal(otlpwire.NewResponse(sig))
	w.Header().Set("Content-Type", otlpwire.ContentProtobuf)
	w.Write(b)
}

func (c *countingCollector) add(sig otlpwire.Signal, m proto.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests[string(sig)]++
	if tr, ok := m.(*coltrace.ExportTraceServiceRequest); ok {
		for _, rs := range tr.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					c.names[sp.Name]++
				}
			}
		}
	}
}

func (c *countingCollector) count(sig string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[sig]
}

// TestLiveRelayThenEndSendsEachOnce: lines handed over during the run
// reach the collector before the run ends; the end sends only the
// others, so the collector holds every payload once.
func TestLiveRelayThenEndSendsEachOnce(t *testing.T) {
	c := newCountingCollector()
	srv := httptest.NewServer(c)
	defer srv.Close()
	lines := []string{spoolLine(otlpwire.Traces, spoolTraces), spoolLine(otlpwire.Metrics, spoolMetrics), spoolLine(otlpwire.Logs, spoolLogs)}
	dir := writeSpool(t, lines...)
	noEnv := func(string) string { return "" }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := NewLiveRelay(ctx, Target{Endpoint: srv.URL}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	r.Add(1, []byte(lines[0]))
	r.Add(2, []byte(lines[1]))
	r.Add(1, []byte(lines[0])) // read again: not sent again
	for deadline := time.Now().Add(20 * time.Second); c.count("traces") < 1 || c.count("metrics") < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lines handed over during the run did not reach the collector: %v (last error %v)", c.requests, r.Err())
		}
	}
	skip := r.Finish(ctx)
	st, err := ForwardAgentTelemetry(ctx, dir, Target{Endpoint: srv.URL}, noEnv, skip)
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests != 3 || st.Live != 2 || st.Sent != 1 {
		t.Errorf("stats %+v, want 3 requests, 2 during the run, 1 at the end", st)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]int{"traces": 1, "metrics": 1, "logs": 1}
	if fmt.Sprint(c.requests) != fmt.Sprint(want) || c.names["plan"] != 1 || c.names["act"] != 1 {
		t.Errorf("collector took %v, spans %v; want each payload once: %v", c.requests, c.names, want)
	}
}

// TestLiveRelayCollectorSilent: a collector that takes the connection
// and never answers neither slows Add nor holds Finish past its bound,
// and a line it never took is sent by the end.
func TestLiveRelayCollectorSilent(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		silent.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	}()
	r, err := NewLiveRelay(context.Background(), Target{Endpoint: "http://" + silent.Addr().String()}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(spoolLine(otlpwire.Traces, spoolTraces))
	start := time.Now()
	for n := 1; n <= 2*liveRelayQueue; n++ {
		r.Add(n, line)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("%d Adds to a silent collector took %v", 2*liveRelayQueue, took)
	}
	const bound = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start = time.Now()
	skip := r.Finish(ctx)
	// Under the upload's own bound (liveSendWait, 5 s): Finish did not
	// wait for the silent collector, only for ctx (slack for a loaded
	// machine).
	if took := time.Since(start); took > bound+2*time.Second {
		t.Errorf("Finish took %v with a bound of %v", took, bound)
	}
	if skip(1) {
		t.Error("a line the collector never answered is counted as sent")
	}
}

// grpcCollector is the collector's three OTLP gRPC services, keeping
// what each took and the metadata it came with.
type grpcCollector struct {
	coltrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	got      map[string]proto.Message
	metadata metadata.MD
}

func (c *grpcCollector) keep(ctx context.Context, sig string, m proto.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[sig] = m
	c.metadata, _ = metadata.FromIncomingContext(ctx)
}

func (c *grpcCollector) Export(ctx context.Context, r *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.keep(ctx, "traces", r)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct {
	colmetrics.UnimplementedMetricsServiceServer
	c *grpcCollector
}

func (s grpcMetrics) Export(ctx context.Context, r *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	s.c.keep(ctx, "metrics", r)
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

type grpcLogs struct {
	collogs.UnimplementedLogsServiceServer
	c *grpcCollector
}

func (s grpcLogs) Export(ctx context.Context, r *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	s.c.keep(ctx, "logs", r)
	return &collogs.ExportLogsServiceResponse{}, nil
}

// TestForwardGRPC: over OTLP/gRPC, relayed metrics and logs reach the
// collector's metrics and logs services (as traces reach its trace
// service), with the headers the host set as metadata.
func TestForwardGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &grpcCollector{got: map[string]proto.Message{}}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, c)
	colmetrics.RegisterMetricsServiceServer(srv, grpcMetrics{c: c})
	collogs.RegisterLogsServiceServer(srv, grpcLogs{c: c})
	go srv.Serve(ln)
	defer srv.Stop()
	dir := writeSpool(t, spoolLine(otlpwire.Traces, spoolTraces), spoolLine(otlpwire.Metrics, spoolMetrics), spoolLine(otlpwire.Logs, spoolLogs))
	env := map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-team=blue"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := ForwardAgentTelemetry(ctx, dir, Target{Endpoint: "http://" + ln.Addr().String(), Protocol: ProtocolGRPC}, func(k string) string { return env[k] }, nil)
	if err != nil || st.Sent != 3 || st.Items != 4 {
		t.Fatalf("got %+v, %v; want 3 requests (4 items) sent", st, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, _ := c.got["metrics"].(*colmetrics.ExportMetricsServiceRequest)
	if m == nil || m.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].Name != "tokens" {
		t.Errorf("metrics as received: %v", c.got["metrics"])
	}
	l, _ := c.got["logs"].(*collogs.ExportLogsServiceRequest)
	if l == nil || l.ResourceLogs[0].ScopeLogs[0].LogRecords[0].Body.GetStringValue() != "thinking" {
		t.Errorf("logs as received: %v", c.got["logs"])
	}
	if _, ok := c.got["traces"].(*coltrace.ExportTraceServiceRequest); !ok {
		t.Error("no traces received")
	}
	if got := c.metadata.Get("x-team"); len(got) != 1 || got[0] != "blue" {
		t.Errorf("metadata x-team %v, want the host's OTEL_EXPORTER_OTLP_HEADERS value", got)
	}
}

// TestForwardFile: with a file, the three signals are OTLP/JSON lines of
// FILE.agent, each the signal's data message, ids in hex.
func TestForwardFile(t *testing.T) {
	dir := writeSpool(t, spoolLine(otlpwire.Traces, spoolTraces), spoolLine(otlpwire.Metrics, spoolMetrics), spoolLine(otlpwire.Logs, spoolLogs))
	file := filepath.Join(t.TempDir(), "run.otlp.json")
	st, err := ForwardAgentTelemetry(context.Background(), dir, Target{File: file}, func(string) string { return "" }, nil)
	if err != nil || st.Sent != 3 {
		t.Fatalf("got %+v, %v; want 3 requests written", st, err)
	}
	b, err := os.ReadFile(AgentFile(file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), b)
	}
	datas := []proto.Message{&tracepb.TracesData{}, &metricspb.MetricsData{}, &logspb.LogsData{}}
	for i, m := range datas {
		if err := otlpwire.UnmarshalJSON([]byte(lines[i]), m); err != nil {
			t.Errorf("line %d is not %T: %v", i+1, m, err)
		}
	}
	if !strings.Contains(lines[0], `"parentSpanId":"b7ad6b7169203331"`) || !strings.Contains(lines[1], `"resourceMetrics"`) || !strings.Contains(lines[2], `"resourceLogs"`) {
		t.Errorf("the lines are not the three signals' data, hex ids:\n%s", b)
	}
}

// TestForwardBoundSpentCountsAll: with the bound already spent (by the
// run's own export, which goes first), nothing is sent, and still every
// request of the spool is counted, those sent during the run as such
// (red team, session 39: the host said "0 of the 0" for a spool of 30).
func TestForwardBoundSpentCountsAll(t *testing.T) {
	lines := []string{spoolLine(otlpwire.Traces, spoolTraces), spoolLine(otlpwire.Metrics, spoolMetrics), spoolLine(otlpwire.Logs, spoolLogs)}
	dir := writeSpool(t, lines...)
	for _, proto := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(proto, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			st, err := ForwardAgentTelemetry(ctx, dir, Target{Endpoint: "http://127.0.0.1:9", Protocol: proto}, func(string) string { return "" },
				func(n int) bool { return n == 1 })
			if st.Requests != 3 || st.Live != 1 || st.Sent != 0 || st.Unsent() != 2 {
				t.Errorf("stats %+v, want 3 requests, 1 during the run, none sent now", st)
			}
			if err == nil || !strings.Contains(err.Error(), "2 not tried") {
				t.Errorf("error %v, want it to say 2 were not tried", err)
			}
		})
	}
}
