package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Declared MCP servers in the roles: the sidecar proxies them (with the
// pins the harness read from the lock), the gateway scopes egress by them.

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

// mcpRunHooks adds to a run what its declared MCP servers need: the
// lock's pins for the sidecar (PlanInput), a refusal of the Squid engine,
// which cannot scope egress per server, and after the run the first
// run's observed definitions written to the lock (trust on first use,
// said as such). It returns the after-run step.
func mcpRunHooks(so *sandbox.Options, errOut io.Writer) func(sandbox.Result) {
	var lockPath string
	var missing []string
	prev := so.PlanInput
	so.PlanInput = func(in *orchestrate.Input) error {
		if prev != nil {
			if err := prev(in); err != nil {
				return err
			}
		}
		servers := in.Profile.Spec.MCPServers
		if len(servers) == 0 {
			return nil
		}
		if in.GatewayEngine == orchestrate.EngineSquid {
			return withCode(ExitInvalidSpec, errors.New("the Squid gateway engine cannot scope egress per MCP server (it cannot tell the sidecar's requests for one server from another's, nor the agent's): run a spec with [[mcp_servers]] with the built-in gateway"))
		}
		lockPath = mcppin.LockPath(in.Profile.Spec.Source)
		lock, err := mcppin.Load(lockPath)
		if err != nil {
			return err
		}
		pins := &mcppin.Lock{Schema: mcppin.Schema, Servers: []mcppin.Server{}}
		for _, m := range servers {
			if p, ok := lock.Server(m.Name); ok {
				pins.Put(p)
			} else {
				missing = append(missing, m.Name)
			}
		}
		js, err := json.Marshal(pins)
		if err != nil {
			return fmt.Errorf("encoding pins: %w", err)
		}
		if in.Env == nil {
			in.Env = map[string][]dockerx.EnvVar{}
		}
		in.Env[orchestrate.RoleSidecar] = append(in.Env[orchestrate.RoleSidecar], dockerx.EnvVar{Name: spec.EnvMCPPins, Value: string(js)})
		// The sidecar sends a credentialed server's requests with the
		// run's placeholder (never the value), which the gateway got.
		for _, e := range in.Env[orchestrate.RoleGateway] {
			if e.Name == spec.EnvCredentialPlaceholder {
				in.Env[orchestrate.RoleSidecar] = append(in.Env[orchestrate.RoleSidecar], dockerx.EnvVar{Name: e.Name, Value: e.Value, Secret: true})
			}
		}
		return nil
	}
	return func(res sandbox.Result) {
		observed := filepath.Join(res.RunDir, orchestrate.RoleSidecar, spec.FileMCPPins)
		if res.RunDir == "" || len(missing) == 0 {
			return
		}
		if _, err := os.Stat(observed); err != nil {
			return // the sidecar connected to none (doctor and test-sandbox never do)
		}
		if err := pinFirstRun(lockPath, observed, missing); err != nil {
			fmt.Fprintf(errOut, "warning: recording MCP tool definitions: %v\n", err)
			return
		}
		fmt.Fprintf(errOut, "pinned the tool definitions of %s in %s (first run; review them, and change them only with `mcpsidecar mcp pin --update`)\n", strings.Join(missing, ", "), lockPath)
	}
}

// pinFirstRun adds to the lock the observed definitions of the servers
// it did not pin yet; what it already pinned is never changed here.
func pinFirstRun(lockPath, observedPath string, names []string) error {
	observed, err := mcppin.Load(observedPath)
	if err != nil {
		return err
	}
	if observed == nil {
		return fmt.Errorf("the sidecar recorded no definitions (%s)", observedPath)
	}
	lock, err := mcppin.Load(lockPath)
	if err != nil {
		return err
	}
	if lock == nil {
		lock = &mcppin.Lock{Schema: mcppin.Schema}
	}
	for _, n := range names {
		if _, done := lock.Server(n); done {
			continue
		}
		if p, ok := observed.Server(n); ok {
			lock.Put(p)
		}
	}
	return lock.Save(lockPath)
}
