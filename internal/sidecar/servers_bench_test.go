//go:build linux

package sidecar

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/mcpfake"
)

// reportLatency records each call's duration and reports p50 and p99.
func reportLatency(b *testing.B, call func()) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		call()
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkDeclaredVsLocal: one tools/call through the sidecar over
// loopback HTTP, to a declared upstream (a second loopback MCP server)
// and to the local tool. The difference is the proxy's cost.
//
//	go test -run '^$' -bench 'DeclaredVsLocal' -benchtime 2000x ./internal/sidecar/
func BenchmarkDeclaredVsLocal(b *testing.B) {
	fake := mcpfake.New(mcpfake.Options{Name: "docs", Tools: docsTools("Search.")})
	srv := newLoopbackServer(b, fake)
	ts := startSidecarB(b, Config{Servers: []ServerConfig{{Name: "docs", URL: srv + "/mcp", Tools: []string{"search"}}}})
	cs := connectB(b, ts)
	for _, tc := range []struct{ name, tool string }{{"declared", "search"}, {"local", ToolHTMLElementName}} {
		b.Run(tc.name, func(b *testing.B) {
			args := map[string]any{"query": "q"}
			if tc.tool == ToolHTMLElementName {
				args = map[string]any{}
			}
			reportLatency(b, func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("call %s: %v %v", tc.tool, err, res)
				}
			})
		})
	}
}

// fiftyTools is a server's list of 50 tools with realistic schemas.
func fiftyTools() []mcpfake.Tool {
	var out []mcpfake.Tool
	for i := range 50 {
		out = append(out, mcpfake.Tool{Name: fmt.Sprintf("tool_%02d", i), Description: fmt.Sprintf("Tool %d: searches the %d-th index and returns up to 10 results as JSON.", i, i),
			Schema: map[string]any{"type": "object", "properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "what to look for"},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": 100},
				"url":   map[string]any{"type": "string", "format": "uri"},
			}, "required": []any{"query"}}})
	}
	return out
}

// BenchmarkPinCheck50: the connect-time cost of pinning for a server with
// 50 tools. "snapshot+compare" is the pin work alone on tools already
// listed; "connect" is a whole connect over loopback (initialize,
// tools/list, pin check, registration), with and without a pin.
//
//	go test -run '^$' -bench 'PinCheck50' -benchtime 200x ./internal/sidecar/
func BenchmarkPinCheck50(b *testing.B) {
	tools := fiftyTools()
	fake := mcpfake.New(mcpfake.Options{Name: "big", Tools: tools})
	url := newLoopbackServer(b, fake) + "/mcp"
	pin, err := ObservePin(context.Background(), ServerConfig{Name: "big", URL: url}, ObserveOptions{})
	if err != nil || len(pin.Tools) != 50 {
		b.Fatalf("pin: %d tools, %v", len(pin.Tools), err)
	}
	b.Run("snapshot+compare", func(b *testing.B) {
		var listed []*mcp.Tool
		for _, t := range tools {
			listed = append(listed, &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Schema})
		}
		r := &remote{cfg: ServerConfig{Name: "big", URL: url}}
		for b.Loop() {
			snap, _, _ := r.snapshot(listed)
			if cs := mcppin.Compare(pin, snap); len(cs) != 0 {
				b.Fatalf("drift: %v", cs)
			}
		}
	})
	for _, tc := range []struct {
		name string
		pin  *mcppin.Server
	}{{"connect/unpinned", nil}, {"connect/pinned", &pin}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := New(Config{Servers: []ServerConfig{{Name: "big", URL: url, Pin: tc.pin}}})
			if err != nil {
				b.Fatal(err)
			}
			r := s.remotes[0]
			for b.Loop() {
				if err := r.connect(context.Background()); err != nil {
					b.Fatal(err)
				}
				r.up.close()
			}
		})
	}
}

func newLoopbackServer(b *testing.B, f *mcpfake.Server) string {
	b.Helper()
	srv := httptest.NewServer(f.Handler())
	b.Cleanup(srv.Close)
	return srv.URL
}

func startSidecarB(b *testing.B, cfg Config) string {
	b.Helper()
	sc, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Serve(ctx, ln) }()
	b.Cleanup(func() { cancel(); <-done })
	url := "http://" + ln.Addr().String()
	for range 100 { // Serve connects the declared servers before it listens
		if resp, err := http.Get(url + HealthPath); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return url
}

func connectB(b *testing.B, baseURL string) *mcp.ClientSession {
	b.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: baseURL + MCPPath, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}
