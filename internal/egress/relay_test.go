//go:build linux

package egress

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

type relayHarness struct {
	*harness
	relayAddr string
	spool     *syncBuffer
}

func startRelay(t testing.TB, cfg Relay, more ...harnessOpt) *relayHarness {
	t.Helper()
	spool := &syncBuffer{}
	cfg.Spool = spool
	opts := append([]harnessOpt{func(o *Options) { o.Relay = &cfg }}, more...)
	h := startGateway(t, testConfig(false), newResolver(nil), false, opts...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.g.ServeRelay(ln)
	return &relayHarness{harness: h, relayAddr: ln.Addr().String(), spool: spool}
}

// spooled parses the spool so far.
func (h *relayHarness) spooled() []RelayLine {
	h.t.Helper()
	var out []RelayLine
	for _, l := range strings.Split(strings.TrimSpace(h.spool.String()), "\n") {
		if l == "" {
			continue
		}
		var rl RelayLine
		if err := json.Unmarshal([]byte(l), &rl); err != nil {
			h.t.Fatalf("spool line %q: %v", l, err)
		}
		out = append(out, rl)
	}
	return out
}

func (h *relayHarness) post(method, path, ctype string, body []byte, hdr ...string) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest(method, "http://"+h.relayAddr+path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var (
	relayTraceID = []byte{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	relaySpanID  = []byte{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
)

// spans is one resource's spans named names, with text as an attribute.
func spans(text string, names ...string) []*tracepb.ResourceSpans {
	ss := &tracepb.ScopeSpans{}
	for _, n := range names {
		ss.Spans = append(ss.Spans, &tracepb.Span{TraceId: relayTraceID, SpanId: relaySpanID, Name: n,
			Attributes: []*commonpb.KeyValue{{Key: "note", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: text}}}}})
	}
	return []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{ss}}}
}

func tracesProto(t testing.TB, text string, names ...string) []byte {
	b, err := proto.Marshal(&coltrace.ExportTraceServiceRequest{ResourceSpans: spans(text, names...)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRelayTakesOTLP: an OpenTelemetry SDK's own OTLP/HTTP client, then
// OTLP/JSON metrics and logs, gzip included: each request is answered as
// a collector answers, spooled as OTLP/JSON with hex ids, and has its
// decision line.
func TestRelayTakesOTLP(t *testing.T) {
	h := startRelay(t, Relay{})
	c := otlptracehttp.NewClient(otlptracehttp.WithEndpoint(h.relayAddr), otlptracehttp.WithInsecure(),
		otlptracehttp.WithHeaders(map[string]string{"Traceparent": testTraceparent}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.UploadTraces(ctx, spans("hello", "plan", "act")); err != nil {
		t.Fatalf("the SDK's upload through the relay: %v", err)
	}
	c.Stop(ctx)
	metrics := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"tokens","sum":{"dataPoints":[{"asInt":"7"}]}}]}]}]}`
	if resp, body := h.post("POST", "/v1/metrics", "application/json", []byte(metrics)); resp.StatusCode != 200 || body != "{}" {
		t.Fatalf("metrics: %s %q", resp.Status, body)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprintf(zw, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"thinking"},"traceId":"%x","spanId":"%x"}]}]}]}`, relayTraceID, relaySpanID)
	zw.Close()
	if resp, body := h.post("POST", "/v1/logs", "application/json; charset=utf-8", gz.Bytes(), "Content-Encoding", "gzip"); resp.StatusCode != 200 {
		t.Fatalf("gzip logs: %s %q", resp.Status, body)
	}
	lines := h.spooled()
	if len(lines) != 3 {
		t.Fatalf("spooled %d lines, want 3:\n%s", len(lines), h.spool.String())
	}
	want := []struct {
		sig   otlpwire.Signal
		items int
	}{{otlpwire.Traces, 2}, {otlpwire.Metrics, 1}, {otlpwire.Logs, 1}}
	for i, w := range want {
		if lines[i].Signal != w.sig || lines[i].Items != w.items {
			t.Errorf("spool line %d: %s with %d items, want %s with %d", i, lines[i].Signal, lines[i].Items, w.sig, w.items)
		}
	}
	if !strings.Contains(string(lines[0].OTLP), `"traceId":"0af7651916cd43dd8448eb211c80319c"`) || lines[0].CorrelationID != testTraceID {
		t.Errorf("traces line: ids not hex, or no correlation id: %s %s", lines[0].CorrelationID, lines[0].OTLP)
	}
	ds := h.waitDecisions(3)
	for i, d := range ds {
		if d.Decision != Allow || d.Rule != RelayRule || d.Path != "/v1/"+string(want[i].sig) || d.Method != "POST" || d.BytesUp == 0 {
			t.Errorf("decision %d: %+v", i, d)
		}
	}
	if c := h.g.Counts(); c.Accepted != 3 || c.Recorded != 3 {
		t.Errorf("counts %+v, want 3 accepted and recorded", c)
	}
	if d := h.dialed(); len(d) != 0 {
		t.Errorf("the relay dialed %v: it must dial nothing", d)
	}
}

// TestRelayRefuses: each way a request is not OTLP/HTTP is refused with
// its reason, in the answer and in a decision line, and nothing is spooled.
func TestRelayRefuses(t *testing.T) {
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(bytes.Repeat([]byte{0}, 5000))
	zw.Close()
	badID := &coltrace.ExportTraceServiceRequest{ResourceSpans: spans("x", "s")}
	badID.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceId = []byte{1, 2, 3}
	badIDBytes, _ := proto.Marshal(badID)
	good := tracesProto(t, "fine", "s")
	cases := []struct {
		name, method, path, ctype string
		body                      []byte
		hdr                       []string
		status                    int
		reason                    string
	}{
		{"wrong path", "POST", "/v1/profiles", otlpwire.ContentProtobuf, good, nil, 404, `path "/v1/profiles" is refused`},
		{"root path", "POST", "/", otlpwire.ContentProtobuf, good, nil, 404, `path "/" is refused`},
		{"query", "POST", "/v1/traces?x=1", otlpwire.ContentProtobuf, good, nil, 404, "without a query"},
		{"GET", "GET", "/v1/traces", "", nil, nil, 405, `method "GET" is refused`},
		{"text", "POST", "/v1/traces", "text/plain", good, nil, 415, `content type "text/plain" is refused`},
		{"no content type", "POST", "/v1/traces", "", good, nil, 415, `content type "" is refused`},
		{"brotli", "POST", "/v1/traces", otlpwire.ContentProtobuf, good, []string{"Content-Encoding", "br"}, 415, `content encoding "br" is refused`},
		{"not protobuf", "POST", "/v1/traces", otlpwire.ContentProtobuf, []byte("\xff\xff\xff garbage"), nil, 400, "not an OTLP traces protobuf payload"},
		{"not JSON", "POST", "/v1/logs", otlpwire.ContentJSON, []byte(`{"resourceLogs":[`), nil, 400, "not OTLP/JSON"},
		{"unknown JSON field", "POST", "/v1/metrics", otlpwire.ContentJSON, []byte(`{"resourceMetrix":[]}`), nil, 400, "not OTLP/JSON"},
		{"id not hex", "POST", "/v1/traces", otlpwire.ContentJSON, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","name":"a"}]}]}]}`), nil, 400, `traceId "zz" is not hex`},
		{"id length", "POST", "/v1/traces", otlpwire.ContentProtobuf, badIDBytes, nil, 400, "trace_id of 3 bytes, want 16"},
		{"bad gzip", "POST", "/v1/traces", otlpwire.ContentProtobuf, good, []string{"Content-Encoding", "gzip"}, 400, "the gzip payload does not read"},
		{"oversize", "POST", "/v1/traces", otlpwire.ContentProtobuf, bytes.Repeat([]byte{0}, 2000), nil, 413, "a payload of 2000 bytes is refused: at most 1024"},
		{"gzip bomb", "POST", "/v1/traces", otlpwire.ContentProtobuf, bomb.Bytes(), []string{"Content-Encoding", "gzip"}, 413, "the payload is over 1024 bytes"},
	}
	h := startRelay(t, Relay{MaxBody: 1024, Rate: 1000, Burst: 1000})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := h.post(c.method, c.path, c.ctype, c.body, c.hdr...)
			if resp.StatusCode != c.status || !strings.Contains(body, c.reason) {
				t.Errorf("got %s %q, want %d with %q", resp.Status, body, c.status, c.reason)
			}
			ds := h.waitDecisions(i + 1)
			if d := ds[i]; d.Decision != Deny || !strings.Contains(d.Reason, c.reason) || d.Rule != "" {
				t.Errorf("decision line %+v, want a denial with %q", d, c.reason)
			}
		})
	}
	if s := h.spool.String(); s != "" {
		t.Errorf("refused requests were spooled:\n%s", s)
	}
}

// TestRelayBounds: past the rate, the burst and the run's budget, a
// request is refused and recorded.
func TestRelayBounds(t *testing.T) {
	body := tracesProto(t, "x", "s")
	t.Run("rate", func(t *testing.T) {
		h := startRelay(t, Relay{Rate: 0.001, Burst: 2})
		var got []int
		for range 3 {
			resp, _ := h.post("POST", "/v1/traces", otlpwire.ContentProtobuf, body)
			got = append(got, resp.StatusCode)
		}
		if fmt.Sprint(got) != "[200 200 429]" {
			t.Errorf("statuses %v, want [200 200 429]", got)
		}
		if ds := h.waitDecisions(3); !strings.Contains(ds[2].Reason, "requests per second (burst 2)") {
			t.Errorf("third line %+v", ds[2])
		}
		if n := len(h.spooled()); n != 2 {
			t.Errorf("spooled %d, want 2", n)
		}
	})
	t.Run("budget", func(t *testing.T) {
		h := startRelay(t, Relay{Budget: 600})
		var got []int
		for range 3 {
			resp, _ := h.post("POST", "/v1/traces", otlpwire.ContentProtobuf, body)
			got = append(got, resp.StatusCode)
		}
		if got[0] != 200 || got[2] != http.StatusInsufficientStorage {
			t.Errorf("statuses %v, want 200 first and 507 last", got)
		}
		ds := h.waitDecisions(3)
		if !strings.Contains(ds[2].Reason, "the run's 600-byte budget is spent") {
			t.Errorf("last line %+v", ds[2])
		}
		if n := int64(len(h.spool.String())); n > 600 {
			t.Errorf("spool holds %d bytes, over its 600-byte budget", n)
		}
	})
}

// TestRelayRefusesHeldValues: a payload (or a header) that carries a
// credential the gateway holds is refused; the line names whose, never
// the value.
func TestRelayRefusesHeldValues(t *testing.T) {
	in := &Injection{Placeholder: testPlaceholder, Credentials: []Credential{{
		Host: "example.com", Scheme: "https", Header: "Authorization", Format: "Bearer {value}",
		Value: testSecret, Source: "OPENAI_API_KEY"}}}
	h := startRelay(t, Relay{}, func(o *Options) { o.Injection = in })
	resp, _ := h.post("POST", "/v1/traces", otlpwire.ContentProtobuf, tracesProto(t, "the key is "+testSecret, "leak"))
	resp2, _ := h.post("POST", "/v1/logs", otlpwire.ContentJSON, []byte(`{}`), "X-Note", testSecret)
	if resp.StatusCode != 403 || resp2.StatusCode != 403 {
		t.Fatalf("statuses %s and %s, want 403", resp.Status, resp2.Status)
	}
	for _, d := range h.waitDecisions(2) {
		if d.Decision != Deny || d.Credential != CredentialCarried || !strings.Contains(d.HeldValue, "OPENAI_API_KEY") {
			t.Errorf("line %+v, want a carried denial naming OPENAI_API_KEY", d)
		}
	}
	if strings.Contains(h.log.String(), testSecret) || h.spool.String() != "" {
		t.Error("the value reached the log or the spool")
	}
}
