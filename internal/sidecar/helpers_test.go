//go:build linux

package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// testSidecar is a sidecar served on a loopback port for one test.
type testSidecar struct {
	*Sidecar
	URL       string // base URL, e.g. http://127.0.0.1:1234
	AuditPath string
	stop      func() error
	// auditFull: Serve may end with [ErrAuditFull] (the test filled the
	// log on purpose).
	auditFull bool
}

// startSidecar serves a sidecar on 127.0.0.1 with an audit log in a temp
// dir. Stop is registered with t.Cleanup; tests may call stopNow earlier.
func startSidecar(t *testing.T, cfg Config) *testSidecar {
	t.Helper()
	path := filepath.Join(t.TempDir(), AuditFileName)
	if cfg.Audit == nil {
		audit, err := OpenAuditLog(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Audit = audit
	}
	sc, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Serve(ctx, ln) }()
	var once sync.Once
	var stopErr error
	ts := &testSidecar{Sidecar: sc, URL: "http://" + ln.Addr().String(), AuditPath: path}
	ts.stop = func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	t.Cleanup(func() {
		if err := ts.stop(); err != nil && !(ts.auditFull && errors.Is(err, ErrAuditFull)) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// startFake serves a fake Learn upstream on loopback and returns its /mcp URL.
func startFake(t *testing.T, opts learnfake.Options) (*learnfake.Server, string) {
	t.Helper()
	fake := learnfake.New(opts)
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	return fake, srv.URL + "/mcp"
}

// connect opens a go-sdk client session to the sidecar. Each session gets
// its own HTTP transport (its own connection), and sends traceparent when
// one is given.
func connect(t *testing.T, baseURL, traceparent string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: &headerRT{base: &http.Transport{}, traceparent: traceparent}}
	tr := &mcp.StreamableClientTransport{Endpoint: baseURL + MCPPath, HTTPClient: hc, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connecting to sidecar: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type headerRT struct {
	base        http.RoundTripper
	traceparent string
}

func (h *headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.traceparent != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Traceparent", h.traceparent)
	}
	return h.base.RoundTrip(r)
}

// readAudit parses every line of the audit log, failing on an invalid line,
// and returns the records other than the call_start lines (each checked to
// come before its call's end line, see readAuditAll).
func readAudit(t *testing.T, path string) []Record {
	t.Helper()
	var out []Record
	for _, r := range readAuditAll(t, path) {
		if r.Kind != KindCallStart {
			out = append(out, r)
		}
	}
	return out
}

// readAuditAll parses every line of the audit log, failing on an invalid
// line or on a call_start whose end line (same correlation id and name)
// does not follow it. (A tools/call the HTTP front refused before dispatch
// has an end line only: it never ran.)
func readAuditAll(t *testing.T, path string) []Record {
	t.Helper()
	recs := readAuditLines(t, path)
	started := map[string]string{}
	for i, r := range recs {
		switch r.Kind {
		case KindCallStart:
			started[r.CorrelationID] = r.Name
		case KindToolCall:
			if name, ok := started[r.CorrelationID]; ok && name != r.Name {
				t.Fatalf("audit line %d: tools/call %s ends a call started as %s (correlation id %s)", i+1, r.Name, name, r.CorrelationID)
			}
			delete(started, r.CorrelationID)
		}
	}
	for id, name := range started {
		t.Fatalf("audit: call_start of %s (correlation id %s) has no end line", name, id)
	}
	return recs
}

// readAuditLines parses every line of the audit log.
func readAuditLines(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		out = append(out, decodeRecord(t, n, sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeRecord checks one line has exactly the contract's fields.
func decodeRecord(t *testing.T, n int, line []byte) Record {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		t.Fatalf("audit line %d is not JSON: %v: %s", n, err, line)
	}
	want := []string{"time", "session_id", "kind", "name", "arguments", "ok", "error", "duration_ms", "result_preview", "correlation_id", "server"}
	if _, ok := fields["interrupted"]; ok {
		want = append(want, "interrupted") // only on an interrupted end line
	}
	if len(fields) != len(want) {
		t.Fatalf("audit line %d has %d fields, want %d: %s", n, len(fields), len(want), line)
	}
	for _, k := range want {
		if _, ok := fields[k]; !ok {
			t.Fatalf("audit line %d lacks %q: %s", n, k, line)
		}
	}
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("audit line %d: %v", n, err)
	}
	if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil || !strings.HasSuffix(r.Time, "Z") {
		t.Fatalf("audit line %d: time %q is not RFC 3339 UTC", n, r.Time)
	}
	if traceIDFromHeader("00-"+r.CorrelationID+"-0000000000000001-01") != r.CorrelationID {
		t.Fatalf("audit line %d: correlation_id %q is not a trace-id", n, r.CorrelationID)
	}
	return r
}

// callText calls a tool and returns its text and IsError.
func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return resultText(res), res.IsError
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// postRaw sends a raw JSON-RPC body to the sidecar's MCP endpoint.
func postRaw(t *testing.T, baseURL, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+MCPPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
