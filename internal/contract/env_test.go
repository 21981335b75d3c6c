package contract

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestEnvContract: the environment the host gives each role's container
// (spec.Resolve of the default spec) is what the role's own reader
// accepts, under the names the role owns. A renamed variable on either
// side, or a value the role cannot read, fails here instead of at the
// container's start.
func TestEnvContract(t *testing.T) {
	s, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{spec.RoleGateway, spec.RoleSidecar, spec.RoleAgent} {
		c, ok := p.Containers[role]
		if !ok {
			t.Fatalf("the default profile has no %s container", role)
		}
		getenv := func(k string) string { return c.Env[k] }
		// Every role hardens itself from harden.EnvPolicy.
		pol, ok, err := harden.PolicyFromEnv(getenv)
		if err != nil || !ok || pol.Role != role {
			t.Errorf("%s: harden.PolicyFromEnv = %+v, %v, %v; want the %s policy", role, pol, ok, err, role)
		}
	}
	t.Run("gateway", func(t *testing.T) { checkGatewayEnv(t, p) })
	t.Run("agent", func(t *testing.T) { checkAgentEnv(t, p) })
}

// checkGatewayEnv decodes netpolicy.EnvPolicy as the gateway command does
// (unknown fields refused) and compiles it; it is the run's policy.
func checkGatewayEnv(t *testing.T, p *spec.Profile) {
	data := p.Containers[spec.RoleGateway].Env[netpolicy.EnvPolicy]
	var c netpolicy.Config
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s %q: %v", netpolicy.EnvPolicy, data, err)
	}
	if _, err := netpolicy.Compile(c); err != nil {
		t.Errorf("compiling %s: %v", netpolicy.EnvPolicy, err)
	}
	if p.Gateway == nil {
		t.Fatal("the default profile has no gateway policy")
	}
	if diff := cmp.Diff(*p.Gateway, c); diff != "" {
		t.Errorf("%s differs from the profile's policy (-profile +env):\n%s", netpolicy.EnvPolicy, diff)
	}
}

// checkAgentEnv: the agent's container as the host fills it (the
// profile's variables, the forwarded host variables, and the credential
// placeholder and listener URL of orchestrate.Credentials) passes the
// agent's own checks (CheckSandbox, LoadConfig), points it at the sidecar
// the host named, and holds the placeholder, never the key.
func checkAgentEnv(t *testing.T, p *spec.Profile) {
	c := p.Containers[spec.RoleAgent]
	host := map[string]string{agent.EnvAPIKey: contractKey, agent.EnvModel: "m"}
	hostenv := func(k string) string { return host[k] }
	placeholder := orchestrate.NewPlaceholder()
	ce, err := orchestrate.Credentials(p, orchestrate.EngineOurs, hostenv, placeholder)
	if err != nil {
		t.Fatal(err)
	}
	env := maps.Clone(c.Env)
	for _, name := range c.ForwardEnv {
		env[name] = host[name]
	}
	for _, v := range ce.Agent {
		env[v.Name] = v.Value
	}
	getenv := func(k string) string { return env[k] }
	dir := t.TempDir()
	if err := agent.CheckSandbox(getenv, dir); err != nil {
		t.Errorf("agent.CheckSandbox: %v", err)
	}
	cfg, err := agent.LoadConfig(agent.Options{OutputDir: dir}, getenv)
	if err != nil {
		t.Fatalf("agent.LoadConfig: %v", err)
	}
	switch {
	case cfg.SidecarURL == "" || cfg.SidecarURL != c.Env[agent.EnvSidecarURL]:
		t.Errorf("agent's sidecar URL %q, want the host's %q", cfg.SidecarURL, c.Env[agent.EnvSidecarURL])
	case cfg.Model != "m":
		t.Errorf("agent's model %q, want the forwarded m", cfg.Model)
	case cfg.APIKey != placeholder:
		t.Errorf("agent's key is not the run's placeholder (the gateway holds the key)")
	case cfg.BaseURL == "" || cfg.BaseURL == agent.DefaultBaseURL:
		t.Errorf("agent's base URL %q, want the gateway's credential listener", cfg.BaseURL)
	}
}
