//go:build linux

package roles

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Declared MCP servers in the roles: the sidecar proxies them (with the
// pins the lifecycle read from the lock, internal/sandbox's mcp.go), the
// gateway scopes egress by them.

// declaredServers reads spec.EnvMCPServers; none when unset.
func declaredServers(getenv func(string) string) ([]spec.RunServer, error) {
	raw := getenv(spec.EnvMCPServers)
	if raw == "" {
		return nil, nil
	}
	var servers []spec.RunServer
	if err := json.Unmarshal([]byte(raw), &servers); err != nil {
		return nil, fmt.Errorf("reading $%s: %w", spec.EnvMCPServers, err)
	}
	return servers, nil
}

// sidecarServers is the sidecar's configuration of the declared servers,
// each with its pin from spec.EnvMCPPins when there is one.
func sidecarServers(getenv func(string) string) ([]sidecar.ServerConfig, error) {
	servers, err := declaredServers(getenv)
	if err != nil || len(servers) == 0 {
		return nil, err
	}
	var lock *mcppin.Lock
	if raw := getenv(spec.EnvMCPPins); raw != "" {
		if lock, err = mcppin.Parse([]byte(raw)); err != nil {
			return nil, fmt.Errorf("$%s: %w", spec.EnvMCPPins, err)
		}
	}
	out := make([]sidecar.ServerConfig, 0, len(servers))
	for _, m := range servers {
		sc := sidecar.ServerConfig{Name: m.Name, URL: m.URL, Tools: m.Tools, OnDrift: m.OnDrift, Prefixed: m.Prefixed}
		if p, ok := lock.Server(m.Name); ok {
			sc.Pin = &p
		}
		if m.CredentialHeader != "" {
			// The gateway holds the credential; the sidecar sends the
			// run's placeholder to the credential listener.
			ph := getenv(spec.EnvCredentialPlaceholder)
			if ph == "" {
				return nil, fmt.Errorf("server %s: the gateway holds its credential but $%s is not set", m.Name, spec.EnvCredentialPlaceholder)
			}
			sc.Credential = &sidecar.CredentialRoute{Listener: fmt.Sprintf("http://%s:%d", spec.GatewayAlias, spec.CredentialPort),
				Header: m.CredentialHeader, Value: strings.ReplaceAll(m.CredentialFormat, spec.ValueToken, ph)}
		}
		out = append(out, sc)
	}
	return out, nil
}

// gatewayScopes is the gateway's scope table, nil without declared servers.
func gatewayScopes(getenv func(string) string) (*egress.Scoper, error) {
	servers, err := declaredServers(getenv)
	if err != nil || len(servers) == 0 {
		return nil, err
	}
	cfg := egress.ScopeConfig{SidecarHost: spec.SidecarAlias}
	for _, m := range servers {
		cfg.Servers = append(cfg.Servers, egress.ScopeServer{Name: m.Name, Hosts: []string{m.Host()}})
	}
	return egress.NewScoper(cfg, nil)
}
