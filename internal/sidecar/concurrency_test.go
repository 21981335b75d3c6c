//go:build linux

package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// TestConcurrentSessions: 100 sessions making 50 calls each leave exactly
// one valid audit line per call, none torn, none lost, none duplicated.
func TestConcurrentSessions(t *testing.T) {
	const sessions, calls = 100, 50
	ts := startSidecar(t, Config{UpstreamURL: "http://127.0.0.1:1/mcp"})
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runSession(ts.URL, fmt.Sprintf("%032x", i+1), calls)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	recs := readAudit(t, ts.AuditPath)
	if len(recs) != sessions*calls {
		t.Fatalf("audit has %d lines, want %d", len(recs), sessions*calls)
	}
	perTrace := map[string]int{}
	for _, r := range recs {
		if !r.OK || r.Name != ToolHTMLElementName || r.ResultPreview != HTMLElementName {
			t.Fatalf("bad record %+v", r)
		}
		perTrace[r.CorrelationID]++
	}
	for i := range sessions {
		if n := perTrace[fmt.Sprintf("%032x", i+1)]; n != calls {
			t.Errorf("session %d has %d lines, want %d", i+1, n, calls)
		}
	}
}

func runSession(baseURL, trace string, calls int) error {
	hc := &http.Client{Transport: &headerRT{base: &http.Transport{}, traceparent: "00-" + trace + "-0000000000000001-01"}}
	defer hc.CloseIdleConnections()
	tr := &mcp.StreamableClientTransport{Endpoint: baseURL + MCPPath, HTTPClient: hc, DisableStandaloneSSE: true}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "load", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer cs.Close()
	for range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolHTMLElementName})
		if err != nil {
			return err
		}
		if got := resultText(res); got != HTMLElementName {
			return fmt.Errorf("got %q", got)
		}
	}
	return nil
}

// TestSessionLimit: a connection over the limit gets a clear JSON-RPC error
// (recorded), and is admitted once a slot frees up.
func TestSessionLimit(t *testing.T) {
	ts := startSidecar(t, Config{UpstreamURL: "http://127.0.0.1:1/mcp", MaxSessions: 2})
	body := call(1, `{"name":"get_html_element_name"}`)
	var held []*http.Client
	for range 2 {
		c := &http.Client{Transport: &http.Transport{}}
		if status, got := postWith(t, c, ts.URL, body); status != http.StatusOK {
			t.Fatalf("admitted connection: %d %s", status, got)
		}
		held = append(held, c) // keeps its idle keep-alive connection
	}
	third := &http.Client{Transport: &http.Transport{}}
	status, got := postWith(t, third, ts.URL, body)
	if status != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, got), "too many concurrent sessions: the sidecar serves at most 2") {
		t.Fatalf("over the limit: %d %s, want 503 with a clear error", status, got)
	}
	held[0].CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _ = postWith(t, third, ts.URL, body)
		if status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != http.StatusOK {
		t.Fatalf("after a slot freed: status %d, want 200", status)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	var refused int
	for _, r := range readAudit(t, ts.AuditPath) {
		if !r.OK && strings.Contains(r.Error, "too many concurrent sessions") && r.Name == ToolHTMLElementName {
			refused++
		}
	}
	if refused < 1 {
		t.Errorf("the refused call was not recorded")
	}
}

func postWith(t *testing.T, c *http.Client, baseURL, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, baseURL+MCPPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestShutdownInterruptsCall: cancelling Serve mid-call cancels the
// upstream request at once instead of waiting for its answer, and the
// audit holds the call's start line and an interrupted end line, in a
// complete, closed log.
func TestShutdownInterruptsCall(t *testing.T) {
	fake, upURL := startFake(t, learnfake.Options{Delay: 30 * time.Second})
	ts := startSidecar(t, Config{UpstreamURL: upURL})
	cs := connect(t, ts.URL, "")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: learn.ToolDocsSearch, Arguments: map[string]any{"query": "q"}})
		done <- err
	}()
	for len(fake.Calls()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	began := time.Now()
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > DefaultShutdownWait+time.Second {
		t.Errorf("shutdown took %v with a call in flight, want under %v", took, DefaultShutdownWait+time.Second)
	}
	<-done
	recs := readAuditAll(t, ts.AuditPath)
	if len(recs) != 2 || recs[0].Kind != KindCallStart || recs[1].Kind != KindToolCall {
		t.Fatalf("audit = %+v, want a call_start line and its end line", recs)
	}
	start, end := recs[0], recs[1]
	if start.Name != learn.ToolDocsSearch || start.Server != learnServer || string(start.Arguments) != `{"query":"q"}` {
		t.Errorf("start line = %+v, want the call's name, server and arguments", start)
	}
	if end.OK || !end.Interrupted || !strings.HasPrefix(end.Error, ErrorInterrupted+":") || end.CorrelationID != start.CorrelationID {
		t.Errorf("end line = %+v, want ok false, interrupted, error %q..., correlation id %s", end, ErrorInterrupted, start.CorrelationID)
	}
	if _, err := http.Get(ts.URL + HealthPath); err == nil {
		t.Errorf("the sidecar still answers after shutdown")
	}
}

// TestShutdownCompletedCallNotInterrupted: a call that ended before
// shutdown keeps its ordinary end line.
func TestShutdownCompletedCallNotInterrupted(t *testing.T) {
	_, upURL := startFake(t, learnfake.Options{})
	ts := startSidecar(t, Config{UpstreamURL: upURL})
	cs := connect(t, ts.URL, "")
	if text, isErr := callText(t, cs, learn.ToolDocsSearch, map[string]any{"query": "q"}); isErr {
		t.Fatalf("call failed: %s", text)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	recs := readAuditAll(t, ts.AuditPath)
	if len(recs) != 2 || !recs[1].OK || recs[1].Interrupted {
		t.Fatalf("audit = %+v, want a start line and an ok end line", recs)
	}
}
