//go:build linux

package sidecar

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
)

// acceptCounter is a loopback listener standing in for the upstream: it
// counts every connection it accepts, so a test can assert there were none.
type acceptCounter struct {
	ln       net.Listener
	accepted atomic.Int64
}

func startAcceptCounter(t *testing.T) *acceptCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &acceptCounter{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.accepted.Add(1)
			_ = c.Close()
		}
	}()
	return a
}

// TestNoUpstreamNeverConnects: in --no-upstream mode the proxy tools are
// listed, each call is a tool error that is audited as failed, and the
// upstream (a loopback listener) never sees a connection, neither from a
// start-up check nor from a call.
func TestNoUpstreamNeverConnects(t *testing.T) {
	up := startAcceptCounter(t)
	ts := startSidecar(t, Config{UpstreamURL: "http://" + up.ln.Addr().String() + "/mcp", NoUpstream: true})
	cs := connect(t, ts.URL, "")

	listed, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	names := map[string]bool{}
	for _, tool := range listed.Tools {
		names[tool.Name] = true
	}
	args := map[string]map[string]any{
		learn.ToolDocsSearch:       {"query": "azure functions"},
		learn.ToolDocsFetch:        {"url": "https://" + up.ln.Addr().(*net.TCPAddr).IP.String() + "/x"},
		learn.ToolCodeSampleSearch: {"query": "blob upload"},
	}
	for _, tool := range learn.Tools() {
		t.Run(tool.Name, func(t *testing.T) {
			if !names[tool.Name] {
				t.Fatalf("tool %s not listed in --no-upstream mode; listed: %v", tool.Name, names)
			}
			text, isErr := callText(t, cs, tool.Name, args[tool.Name])
			if !isErr || !strings.Contains(text, ErrNoUpstream.Error()) {
				t.Errorf("call %s = (%q, isError %v), want a tool error containing %q", tool.Name, text, isErr, ErrNoUpstream)
			}
		})
	}
	if _, err := ts.CheckUpstream(context.Background()); err != ErrNoUpstream {
		t.Errorf("CheckUpstream = %v, want ErrNoUpstream", err)
	}
	if err := ts.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if n := up.accepted.Load(); n != 0 {
		t.Errorf("upstream accepted %d connections, want 0", n)
	}
	failed := 0
	for _, r := range readAudit(t, ts.AuditPath) {
		if r.Kind == KindToolCall && !r.OK && strings.Contains(r.Error, "--no-upstream") {
			failed++
		}
	}
	if failed != len(learn.Tools()) {
		t.Errorf("audit has %d failed --no-upstream calls, want %d", failed, len(learn.Tools()))
	}
}

// TestNoUpstreamLeavesLocalTools: the local tool still works offline.
func TestNoUpstreamLeavesLocalTools(t *testing.T) {
	up := startAcceptCounter(t)
	sc, err := New(Config{UpstreamURL: "http://" + up.ln.Addr().String() + "/mcp", NoUpstream: true})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := sc.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if text, isErr := callText(t, cs, ToolHTMLElementName, map[string]any{}); isErr || !strings.Contains(text, HTMLElementName) {
		t.Errorf("%s = (%q, isError %v), want %q", ToolHTMLElementName, text, isErr, HTMLElementName)
	}
	if n := up.accepted.Load(); n != 0 {
		t.Errorf("upstream accepted %d connections, want 0", n)
	}
}
