//go:build linux

package sidecar

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// swapHandler lets a test replace the upstream (a restart that forgets all
// sessions) or make it crash mid-call (hijack and close the connection).
type swapHandler struct {
	h     atomic.Pointer[http.Handler]
	crash atomic.Bool
}

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.crash.Load() && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
		time.Sleep(50 * time.Millisecond) // the call is in flight
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	(*s.h.Load()).ServeHTTP(w, r)
}

func TestUpstreamFailures(t *testing.T) {
	query := map[string]any{"query": "HttpClient"}
	tests := []struct {
		name    string
		opts    learnfake.Options
		cfg     Config
		tool    string
		args    map[string]any
		wantErr string
	}{
		{"timeout", learnfake.Options{Delay: 10 * time.Second}, Config{UpstreamTimeout: 200 * time.Millisecond},
			learn.ToolDocsSearch, query, "did not answer within 200ms"},
		{"huge result", learnfake.Options{HugeResultBytes: 4 << 20}, Config{MaxUpstreamBytes: 256 << 10},
			learn.ToolDocsSearch, query, "calling upstream tool microsoft_docs_search"},
		{"schema drift", learnfake.Options{Drift: map[string]learn.Tool{learn.ToolCodeSampleSearch: {
			Properties: map[string]learn.Property{"query": {Type: "string"}, "language": {Type: "array"}}, Required: []string{"query", "language"}}}},
			Config{}, learn.ToolCodeSampleSearch, query, `argument "language" has type "array", want "string"`},
		{"tool missing upstream", learnfake.Options{Omit: []string{learn.ToolDocsFetch}}, Config{},
			learn.ToolDocsFetch, map[string]any{"url": "https://127.0.0.1/x"}, "does not offer tool microsoft_docs_fetch"},
		{"fetch on another host", learnfake.Options{}, Config{},
			learn.ToolDocsFetch, map[string]any{"url": "https://evil.example/x"}, `only pages on 127.0.0.1 are fetched`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake, upURL := startFake(t, tc.opts)
			tc.cfg.UpstreamURL = upURL
			ts := startSidecar(t, tc.cfg)
			cs := connect(t, ts.URL, "")
			start := time.Now()
			got, isErr := callText(t, cs, tc.tool, tc.args)
			if !isErr || !strings.Contains(got, tc.wantErr) {
				t.Fatalf("%s = %q (isError %v), want a tool error containing %q", tc.tool, got, isErr, tc.wantErr)
			}
			// The upstream holds the call for 10 s; only the timeout ends it sooner.
			if d := time.Since(start); tc.name == "timeout" && d > 8*time.Second {
				t.Errorf("the timed-out call took %s", d)
			}
			// The sidecar keeps serving.
			if got, isErr := callText(t, cs, ToolHTMLElementName, nil); isErr || got != HTMLElementName {
				t.Fatalf("after the failure, %s = %q (isError %v)", ToolHTMLElementName, got, isErr)
			}
			if tc.name == "fetch on another host" && len(fake.Calls()) != 0 {
				t.Errorf("a refused fetch reached the upstream: %+v", fake.Calls())
			}
			if err := ts.stop(); err != nil {
				t.Fatal(err)
			}
			recs := readAudit(t, ts.AuditPath)
			if len(recs) != 2 || recs[0].OK || !strings.Contains(recs[0].Error, tc.wantErr) || recs[0].Name != tc.tool {
				t.Fatalf("audit = %+v, want a failed %s record with %q, then one ok call", recs, tc.tool, tc.wantErr)
			}
		})
	}
}

// TestUpstreamCrashAndReconnect: the upstream drops the connection
// mid-call (the caller gets a tool error), then restarts without the old
// session (the sidecar re-establishes a session and the call succeeds).
func TestUpstreamCrashAndReconnect(t *testing.T) {
	sw := &swapHandler{}
	sw.set(learnfake.New(learnfake.Options{}).Handler())
	srv := httptest.NewServer(sw)
	t.Cleanup(srv.Close)
	ts := startSidecar(t, Config{UpstreamURL: srv.URL + "/mcp"})
	if _, err := ts.CheckUpstream(context.Background()); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, ts.URL, "")
	args := map[string]any{"query": "HttpClient"}

	sw.crash.Store(true)
	got, isErr := callText(t, cs, learn.ToolDocsSearch, args)
	if !isErr || !strings.Contains(got, "upstream") {
		t.Fatalf("during the crash: %q (isError %v), want an upstream tool error", got, isErr)
	}
	sw.crash.Store(false)
	restarted := learnfake.New(learnfake.Options{})
	sw.set(restarted.Handler())
	got, isErr = callText(t, cs, learn.ToolDocsSearch, args)
	if isErr || !strings.Contains(got, "IHttpClientFactory") {
		t.Fatalf("after the restart: %q (isError %v), want the canned result", got, isErr)
	}
	if n := len(restarted.Calls()); n != 1 {
		t.Errorf("restarted upstream saw %d calls, want 1", n)
	}
}

// TestUpstreamUnreachable: nothing listens upstream; calls fail fast with
// a tool error and the sidecar keeps serving.
func TestUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ts := startSidecar(t, Config{UpstreamURL: "http://" + addr + "/mcp"})
	cs := connect(t, ts.URL, "")
	got, isErr := callText(t, cs, learn.ToolDocsSearch, map[string]any{"query": "x"})
	if !isErr || !strings.Contains(got, "connecting to upstream") {
		t.Fatalf("got %q (isError %v), want a connection error", got, isErr)
	}
	if got, isErr := callText(t, cs, ToolHTMLElementName, nil); isErr || got != HTMLElementName {
		t.Fatalf("sidecar stopped serving: %q", got)
	}
}
