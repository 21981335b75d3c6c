//go:build linux

package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// TestScopeLive runs the scope table in a live gateway: the sidecar is
// whoever connects from 127.0.0.2 (its alias resolves there), everything
// else on loopback is the agent. Two MCP servers listen on loopback under
// the names mcp-a.test and mcp-b.test.
func TestScopeLive(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]http.Header{}
	server := func(name string) (*httptest.Server, uint16) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = append(seen[name], r.Header.Clone())
			mu.Unlock()
			fmt.Fprintf(w, "hello from %s", name)
		}))
		t.Cleanup(srv.Close)
		return srv, netip.MustParseAddrPort(srv.Listener.Addr().String()).Port()
	}
	_, pa := server("a")
	_, pb := server("b")
	cfg := netpolicy.NewConfig([]string{fmt.Sprintf("mcp-a.test:%d", pa), fmt.Sprintf("mcp-b.test:%d", pb)}, []string{"127.0.0.1/32"})
	scopes, err := NewScoper(ScopeConfig{SidecarHost: "mcp-sidecar", Servers: []ScopeServer{
		{Name: "a", Hosts: []string{fmt.Sprintf("mcp-a.test:%d", pa)}},
		{Name: "b", Hosts: []string{fmt.Sprintf("mcp-b.test:%d", pb)}},
	}}, func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res := newResolver(map[string]string{"mcp-a.test": "127.0.0.1", "mcp-b.test": "127.0.0.1"})
	h := startGateway(t, cfg, res, true, func(o *Options) { o.Scopes = scopes })

	get := func(from, host string, port uint16, claim string) int {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hdr := ""
		if claim != "" {
			hdr = HeaderScope + ": " + claim + "\r\n"
		}
		resp, _, _, _ := h.rawOn(c, fmt.Sprintf("GET http://%s:%d/mcp HTTP/1.1\r\nHost: %s:%d\r\n%sConnection: close\r\n\r\n", host, port, host, port, hdr))
		return resp.StatusCode
	}
	tests := []struct {
		name        string
		from, host  string
		port        uint16
		claim       string
		status      int
		scope, deny string
	}{
		{"sidecar for a reaches a", "127.0.0.2", "mcp-a.test", pa, "server=a; tool=search", 200, "sidecar/a/search", ""},
		{"sidecar for a refused at b", "127.0.0.2", "mcp-b.test", pb, "server=a; tool=search", 403, "sidecar/a/search", `outside server "a"'s scope`},
		{"agent claiming the sidecar's scope", "127.0.0.1", "mcp-a.test", pa, "server=a; tool=search", 403, "agent/a/search", "scope impersonation"},
		{"agent straight to a server", "127.0.0.1", "mcp-b.test", pb, "", 403, "agent", "only the sidecar reaches it"},
		{"sidecar without a claim", "127.0.0.2", "mcp-b.test", pb, "", 403, "sidecar", "names the server"},
	}
	for i, tt := range tests {
		if got := get(tt.from, tt.host, tt.port, tt.claim); got != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.status)
		}
		d := h.waitDecisions(i + 1)[i]
		if d.Scope != tt.scope || (tt.deny == "") != (d.Decision == Allow) || !strings.Contains(d.Reason, tt.deny) {
			t.Errorf("%s: decision %s scope %q reason %q; want scope %q reason with %q", tt.name, d.Decision, d.Scope, d.Reason, tt.scope, tt.deny)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen["a"]) != 1 || len(seen["b"]) != 0 {
		t.Fatalf("servers saw a=%d b=%d requests, want 1 and 0", len(seen["a"]), len(seen["b"]))
	}
	if v := seen["a"][0].Get(HeaderScope); v != "" {
		t.Errorf("the scope header reached the server: %q", v)
	}
}
