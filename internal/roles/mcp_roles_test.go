//go:build linux

package roles

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

const rolesSpec = `schema_version = 1
capabilities = ["network", "mcp_client"]
allowed_domains = [".example.com", "mcp-b.test:8080"]

[[mcp_servers]]
name = "docs"
url = "https://docs.example.com/mcp"
tools = ["search"]

[[mcp_servers]]
name = "wiki"
url = "http://mcp-b.test:8080/mcp"
on_drift = "warn"
prefix_tools = true
`

func rolesProfile(t *testing.T) (*spec.Profile, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sandbox_spec.toml")
	if err := os.WriteFile(path, []byte(rolesSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	return p, path
}

// TestMCPRoles: the env the spec gives the sidecar and the gateway turns
// into the sidecar's servers (with pins) and the gateway's scope table.
func TestMCPRoles(t *testing.T) {
	p, _ := rolesProfile(t)
	pin := mcppin.NewServer("docs", "https://docs.example.com/mcp", nil, nil)
	lock := &mcppin.Lock{}
	lock.Put(pin)
	pins, _ := json.Marshal(lock)
	env := map[string]string{spec.EnvMCPServers: p.Containers[spec.RoleSidecar].Env[spec.EnvMCPServers], spec.EnvMCPPins: string(pins)}
	servers, err := sidecarServers(func(k string) string { return env[k] })
	if err != nil || len(servers) != 2 {
		t.Fatalf("sidecarServers = %+v, %v", servers, err)
	}
	if servers[0].Pin == nil || servers[1].Pin != nil || !servers[1].Prefixed || servers[1].OnDrift != "warn" {
		t.Errorf("servers %+v: want docs pinned, wiki unpinned, prefixed, warn", servers)
	}
	if p.Containers[spec.RoleGateway].Env[spec.EnvMCPServers] == "" {
		t.Fatal("the gateway does not get the servers")
	}
	sc, err := gatewayScopes(func(k string) string { return p.Containers[spec.RoleGateway].Env[k] })
	if err != nil || sc == nil {
		t.Fatalf("gatewayScopes: %v", err)
	}
	if none, err := gatewayScopes(func(string) string { return "" }); none != nil || err != nil {
		t.Errorf("without servers: %v, %v; want no scopes", none, err)
	}
	if _, err := sidecarServers(func(k string) string { return map[string]string{spec.EnvMCPServers: "[{"}[k] }); err == nil {
		t.Error("a broken servers variable was accepted")
	}
}

// TestMCPRolesCredential: a server whose host has a credential is routed
// through the credential listener with the run's placeholder, never a
// value; without the placeholder the sidecar refuses to start.
func TestMCPRolesCredential(t *testing.T) {
	text := rolesSpec + `
[[credentials]]
host = "docs.example.com"
header = "Authorization"
format = "Bearer {value}"
from_host = "DOCS_TOKEN"
`
	s, err := spec.Load("creds.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{spec.EnvMCPServers: p.Containers[spec.RoleSidecar].Env[spec.EnvMCPServers], spec.EnvCredentialPlaceholder: "mcpsidecar-placeholder-00"}
	servers, err := sidecarServers(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := servers[0].Credential
	if c == nil || c.Listener != "http://egress-gateway:3129" || c.Header != "Authorization" || c.Value != "Bearer mcpsidecar-placeholder-00" {
		t.Errorf("docs route %+v", c)
	}
	if servers[1].Credential != nil {
		t.Errorf("wiki has no credential, got %+v", servers[1].Credential)
	}
	delete(env, spec.EnvCredentialPlaceholder)
	if _, err := sidecarServers(func(k string) string { return env[k] }); err == nil {
		t.Error("no placeholder accepted")
	}
	if got := p.Containers[spec.RoleSidecar].Harden.Landlock.ConnectTCP; !slices.Contains(got, uint16(spec.CredentialPort)) {
		t.Errorf("sidecar may connect to %v, want the credential port too", got)
	}
}
