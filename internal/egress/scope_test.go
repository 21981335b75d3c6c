//go:build linux

package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func testScoper(t *testing.T) *Scoper {
	t.Helper()
	s, err := NewScoper(ScopeConfig{SidecarHost: "mcp-sidecar", Servers: []ScopeServer{
		{Name: "docs", Hosts: []string{"docs.example.com"}},
		{Name: "wiki", Hosts: []string{"mcp-b.test:8080"}},
	}}, func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != "mcp-sidecar" {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr("10.213.0.3")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScopeDecisionTable is the table of docs/egress.md, row by row.
func TestScopeDecisionTable(t *testing.T) {
	s := testScoper(t)
	tests := []struct {
		name    string
		req     ScopeRequest
		scope   string
		allow   bool
		because string
	}{
		{"agent to the model", ScopeRequest{Host: "api.openai.com", Port: 443}, "agent", true, ""},
		{"agent to an allowed page", ScopeRequest{Host: "www.example.com", Port: 443}, "agent", true, ""},
		{"agent straight to a server", ScopeRequest{Host: "docs.example.com", Port: 443}, "agent", false, "only the sidecar reaches it"},
		{"agent to a server's port", ScopeRequest{Host: "mcp-b.test", Port: 8080}, "agent", false, "only the sidecar reaches it"},
		{"agent to a server's host, other port", ScopeRequest{Host: "mcp-b.test", Port: 443}, "agent", false, "only the sidecar reaches it"},
		{"agent to a server's host, port 80", ScopeRequest{Host: "docs.example.com", Port: 80}, "agent", false, "only the sidecar reaches it"},
		{"sidecar for wiki, other port", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=wiki; tool=x", Host: "mcp-b.test", Port: 443}, "sidecar/wiki/x", false, "outside server"},
		{"sidecar without a claim", ScopeRequest{FromSidecar: true, Host: "docs.example.com", Port: 443}, "sidecar", false, "names the server it acts for"},
		{"sidecar for docs", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=docs; tool=search", Host: "docs.example.com", Port: 443}, "sidecar/docs/search", true, ""},
		{"sidecar for docs at connect", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=docs", Host: "docs.example.com", Port: 443}, "sidecar/docs", true, ""},
		{"sidecar for docs to wiki's host", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=docs; tool=fetch", Host: "mcp-b.test", Port: 8080}, "sidecar/docs/fetch", false, `outside server "docs"'s scope`},
		{"sidecar for docs to the model", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=docs; tool=fetch", Host: "api.openai.com", Port: 443}, "sidecar/docs/fetch", false, "outside server"},
		{"sidecar for an unknown server", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=evil", Host: "docs.example.com", Port: 443}, "sidecar/evil", false, "unknown server"},
		{"agent impersonating the sidecar", ScopeRequest{Claimed: true, Claim: "server=docs; tool=search", Host: "docs.example.com", Port: 443}, "agent/docs/search", false, "scope impersonation"},
		{"malformed claim", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "docs", Host: "docs.example.com", Port: 443}, "sidecar", false, "malformed scope"},
		{"claim with an extra key", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=docs; host=x", Host: "docs.example.com", Port: 443}, "sidecar", false, "malformed scope"},
		{"claim naming two servers", ScopeRequest{FromSidecar: true, Claimed: true, Claim: "server=docs; server=wiki", Host: "docs.example.com", Port: 443}, "sidecar", false, "malformed scope"},
		{"empty claim", ScopeRequest{Claimed: true, Claim: "", Host: "api.openai.com", Port: 443}, "agent", false, "malformed scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := s.Judge(tt.req)
			if v.Scope.String() != tt.scope || v.Allow != tt.allow {
				t.Fatalf("got scope %s allow %v (%s), want scope %s allow %v", v.Scope, v.Allow, v.Reason, tt.scope, tt.allow)
			}
			if !tt.allow && !strings.Contains(v.Reason, tt.because) {
				t.Errorf("reason %q, want it to say %q", v.Reason, tt.because)
			}
			if tt.allow && v.Reason != "" {
				t.Errorf("allowed with reason %q", v.Reason)
			}
		})
	}
}

// TestScopeGateway: the gateway names the scope on the decision line and
// refuses with it; the sidecar is recognised by source address only.
func TestScopeGateway(t *testing.T) {
	g := &Gateway{scopes: testScoper(t)}
	tests := []struct {
		client string
		claim  []string
		host   string
		port   uint16
		scope  string
		deny   string
	}{
		{"10.213.0.3:40000", []string{"server=docs; tool=search"}, "docs.example.com", 443, "sidecar/docs/search", ""},
		{"10.213.0.9:40000", []string{"server=docs; tool=search"}, "docs.example.com", 443, "agent/docs/search", "scope agent/docs/search: scope impersonation"},
		{"10.213.0.3:40000", []string{"server=docs; tool=a", "server=wiki; tool=b"}, "docs.example.com", 443, "sidecar/docs/a", "more than once"},
		{"[::ffff:10.213.0.3]:40000", []string{"server=wiki"}, "mcp-b.test", 8080, "sidecar/wiki", ""},
		{"garbage", []string{"server=docs"}, "docs.example.com", 443, "agent/docs", "impersonation"},
		{"10.213.0.9:40000", nil, "api.openai.com", 443, "agent", ""},
	}
	for _, tt := range tests {
		d := &Decision{Client: tt.client, ScopeClaim: tt.claim}
		dn := g.judgeScope(context.Background(), d, &target{host: tt.host, port: tt.port})
		if d.Scope != tt.scope {
			t.Errorf("%s %v: scope %q, want %q", tt.client, tt.claim, d.Scope, tt.scope)
		}
		switch {
		case tt.deny == "" && dn != nil:
			t.Errorf("%s %v: denied: %v", tt.client, tt.claim, dn)
		case tt.deny != "" && (dn == nil || !strings.Contains(dn.reason, tt.deny)):
			t.Errorf("%s %v: got %v, want a denial saying %q", tt.client, tt.claim, dn, tt.deny)
		}
	}
	if dn := (&Gateway{}).judgeScope(context.Background(), &Decision{ScopeClaim: []string{"x"}}, &target{host: "a.test", port: 443}); dn != nil {
		t.Errorf("without a scope table: %v", dn)
	}
}

// TestScopeSidecarLookupFails: when the sidecar's alias does not resolve,
// nobody is the sidecar (fail closed).
func TestScopeSidecarLookupFails(t *testing.T) {
	s, err := NewScoper(ScopeConfig{SidecarHost: "mcp-sidecar", Servers: []ScopeServer{{Name: "docs", Hosts: []string{"docs.example.com"}}}},
		func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("no resolver") })
	if err != nil {
		t.Fatal(err)
	}
	if s.IsSidecar(context.Background(), "10.213.0.3:1") {
		t.Error("a failed lookup made a client the sidecar")
	}
}

func TestNewScoperRefuses(t *testing.T) {
	for _, cfg := range []ScopeConfig{
		{},
		{SidecarHost: "s", Servers: []ScopeServer{{Name: "Docs", Hosts: []string{"a.test"}}}},
		{SidecarHost: "s", Servers: []ScopeServer{{Name: "a", Hosts: []string{"a.test"}}, {Name: "a", Hosts: []string{"b.test"}}}},
		{SidecarHost: "s", Servers: []ScopeServer{{Name: "a"}}},
		{SidecarHost: "s", Servers: []ScopeServer{{Name: "a", Hosts: []string{"a.test:0"}}}},
	} {
		if _, err := NewScoper(cfg, nil); err == nil {
			t.Errorf("NewScoper(%+v) accepted", cfg)
		}
	}
}

// TestScopeMappedLiteral: a declared server named by an IP literal is its
// scope however the literal is spelled (red-team finding
// TestRedteamScopeMappedLiteral).
func TestScopeMappedLiteral(t *testing.T) {
	s, err := NewScoper(ScopeConfig{SidecarHost: "mcp-sidecar", Servers: []ScopeServer{{Name: "srv", Hosts: []string{"127.0.0.1:8080"}}}},
		func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("none") })
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "::ffff:127.0.0.1", "::ffff:7f00:1"} {
		if v := s.Judge(ScopeRequest{Host: host, Port: 8080}); v.Allow || v.Scope.Role != RoleAgent {
			t.Errorf("agent to %s:8080 = %+v, want denied", host, v)
		}
	}
	s2, err := NewScoper(ScopeConfig{SidecarHost: "mcp-sidecar", Servers: []ScopeServer{{Name: "srv", Hosts: []string{"[::ffff:127.0.0.1]:8080"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := s2.Judge(ScopeRequest{Host: "127.0.0.1", Port: 8080}); v.Allow {
		t.Errorf("a server declared by its mapped form: agent allowed to its IPv4 form")
	}
}

// TestScopeByAddress: the agent cannot reach a declared server under
// another name, or as its address, on the server's port; other ports of
// that address, and the sidecar, are not affected.
func TestScopeByAddress(t *testing.T) {
	g := &Gateway{scopes: testScoper(t), resolver: newResolver(map[string]string{"docs.example.com": "203.0.113.7", "mcp-b.test": "10.213.0.9"})}
	tests := []struct {
		scope string
		host  string
		port  uint16
		addr  string
		deny  bool
	}{
		{"agent", "alias.example.com", 443, "203.0.113.7", true},
		{"agent", "203.0.113.7", 443, "203.0.113.7", true},
		{"agent", "alias.example.com", 443, "::ffff:203.0.113.7", true},
		{"agent", "other.test", 8080, "10.213.0.9", true},
		{"agent", "alias.example.com", 80, "203.0.113.7", false},
		{"agent", "www.example.com", 443, "203.0.113.8", false},
		{"sidecar/docs/search", "alias.example.com", 443, "203.0.113.7", false},
	}
	for _, tt := range tests {
		d := &Decision{Scope: tt.scope}
		dn := g.judgeScopeAddrs(context.Background(), d, &target{host: tt.host, port: tt.port}, []netip.Addr{netip.MustParseAddr(tt.addr)})
		if (dn != nil) != tt.deny {
			t.Errorf("%s %s:%d -> %s: denial %v, want deny %v", tt.scope, tt.host, tt.port, tt.addr, dn, tt.deny)
		}
	}
}
