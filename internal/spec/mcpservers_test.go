package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDefaultMCPServer: mcp_client without [[mcp_servers]] is the Learn
// server with its three tools, and the seed spec keeps its hash.
func TestDefaultMCPServer(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	want := []MCPServer{{Name: "learn", URL: "https://learn.microsoft.com/api/mcp",
		Tools:   []string{"microsoft_docs_search", "microsoft_docs_fetch", "microsoft_code_sample_search"},
		OnDrift: DriftFail, Default: true}}
	if diff := cmp.Diff(want, s.Servers()); diff != "" {
		t.Errorf("default servers mismatch (-want +got):\n%s", diff)
	}
	if len(s.MCPServers) != 0 {
		t.Errorf("the default is not written into the spec: %+v", s.MCPServers)
	}
	_, hash, err := Normalize(s)
	if err != nil {
		t.Fatal(err)
	}
	// The seed McpSidecar's hash of its default spec (resolved-profile golden).
	if hash != "9d0d772f10f036c6" {
		t.Errorf("default spec hash = %s, want 9d0d772f10f036c6 (a seed spec must keep its identity)", hash)
	}
	noMCP := &Spec{SchemaVersion: 1, Capabilities: []string{CapNetwork}}
	if got := noMCP.Servers(); got != nil {
		t.Errorf("without mcp_client Servers() = %+v, want none", got)
	}
}

func TestMCPServersValid(t *testing.T) {
	s, err := LoadFile("testdata/valid/mcp_servers.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []MCPServer{
		{Name: "docs", URL: "https://docs.example.com/mcp", Tools: []string{"search", "fetch"}, OnDrift: DriftFail},
		{Name: "wiki", URL: "http://mcp-b.test:8080/mcp", OnDrift: DriftWarn, Prefixed: true},
	}
	if diff := cmp.Diff(want, s.Servers()); diff != "" {
		t.Errorf("servers mismatch (-want +got):\n%s", diff)
	}
	if got := s.Servers()[1].ExposedName("lookup"); got != "wiki_lookup" {
		t.Errorf("prefixed name = %q, want wiki_lookup", got)
	}
	if got := s.Servers()[0].ExposedName("search"); got != "search" {
		t.Errorf("unprefixed name = %q, want search", got)
	}
}

func TestMCPServerHost(t *testing.T) {
	tests := []struct{ url, want string }{
		{"https://Docs.Example.com./mcp", "docs.example.com"},
		{"https://docs.example.com:443/mcp", "docs.example.com"},
		{"https://docs.example.com:8443/mcp", "docs.example.com:8443"},
		{"http://mcp-b.test:8080/mcp", "mcp-b.test:8080"},
		{"http://mcp-b.test/mcp", "mcp-b.test:80"},
		{"https://[2001:db8::1]/mcp", "2001:db8::1"},
	}
	for _, tt := range tests {
		if got := (MCPServer{URL: tt.url}).Host(); got != tt.want {
			t.Errorf("Host(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

// TestMCPServersChangeTheHash: declaring the default explicitly is a
// different spec (its hash says so), and each field counts.
func TestMCPServersChangeTheHash(t *testing.T) {
	base, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	_, h0, _ := Normalize(base)
	seen := map[string]string{h0: "none"}
	for name, m := range map[string]MCPServer{
		"default":  DefaultMCPServer(),
		"warn":     {Name: "learn", URL: DefaultMCPURL, OnDrift: DriftWarn},
		"prefixed": {Name: "learn", URL: DefaultMCPURL, OnDrift: DriftFail, Prefixed: true},
	} {
		s := *base
		s.MCPServers = []MCPServer{m}
		_, h, err := Normalize(&s)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s share hash %s", name, other, h)
		}
		seen[h] = name
	}
}
