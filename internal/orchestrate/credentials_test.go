package orchestrate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

const testPlaceholder = "mcpsidecar-placeholder-test0123456789"

func openAIProfile(t *testing.T, inSandbox bool) *spec.Profile {
	t.Helper()
	src := "schema_version = 1\ncapabilities = [\"network\", \"openai_agents\"]\n"
	if inSandbox {
		src += "credentials_in_sandbox = true\n"
	}
	s, err := spec.Load("test.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func envMap(env []dockerx.EnvVar) map[string]dockerx.EnvVar {
	m := map[string]dockerx.EnvVar{}
	for _, e := range env {
		m[e.Name] = e
	}
	return m
}

// TestCredentialsHeldByGateway: the real key goes to the gateway only
// (secret), the agent gets the placeholder and a base URL at the
// credential listener naming the host of the host's OPENAI_BASE_URL.
func TestCredentialsHeldByGateway(t *testing.T) {
	tests := []struct {
		baseURL   string
		agentURL  string
		wantRoute spec.GatewayCredential
	}{
		{"", "http://egress-gateway:3129/api.openai.com/v1",
			spec.GatewayCredential{Host: "api.openai.com", Scheme: "https", Header: "Authorization", Format: "Bearer {value}", FromEnv: "OPENAI_API_KEY"}},
		{"http://host.docker.internal:11434/v1/", "http://egress-gateway:3129/host.docker.internal:11434/v1",
			spec.GatewayCredential{Host: "host.docker.internal", Port: 11434, Scheme: "http", Header: "Authorization", Format: "Bearer {value}", FromEnv: "OPENAI_API_KEY"}},
	}
	for _, tt := range tests {
		t.Run(tt.baseURL, func(t *testing.T) {
			getenv := func(k string) string {
				return map[string]string{"OPENAI_API_KEY": "sk-real", "OPENAI_BASE_URL": tt.baseURL}[k]
			}
			ce, err := Credentials(openAIProfile(t, false), EngineOurs, getenv, testPlaceholder)
			if err != nil {
				t.Fatal(err)
			}
			agent, gw := envMap(ce.Agent), envMap(ce.Gateway)
			if agent["OPENAI_API_KEY"].Value != testPlaceholder || agent["OPENAI_BASE_URL"].Value != tt.agentURL {
				t.Errorf("agent env %+v", ce.Agent)
			}
			for _, e := range ce.Agent {
				if strings.Contains(e.Value, "sk-real") {
					t.Errorf("the agent gets the real key in %s", e.Name)
				}
			}
			if k := gw["OPENAI_API_KEY"]; k.Value != "sk-real" || !k.Secret || !gw[spec.EnvCredentialPlaceholder].Secret {
				t.Errorf("gateway env %+v", ce.Gateway)
			}
			var routes []spec.GatewayCredential
			if err := json.Unmarshal([]byte(gw[spec.EnvGatewayCredentials].Value), &routes); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]spec.GatewayCredential{tt.wantRoute}, routes); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"sk-real"}, ce.Secrets); diff != "" || len(ce.Degradations) != 0 {
				t.Errorf("secrets %v, degradations %v", ce.Secrets, ce.Degradations)
			}
		})
	}
}

// TestCredentialsInSandbox: with the Squid engine (which cannot inject)
// or credentials_in_sandbox, the agent holds the real key, and only the
// Squid case (which the spec did not ask for) is a run degradation; the
// opt-out is in the profile's ledger.
func TestCredentialsInSandbox(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"OPENAI_API_KEY": "sk-real"}[k] }
	for _, tt := range []struct {
		name      string
		inSandbox bool
		engine    string
		agentKey  string // in ce.Agent (Squid) or the profile's ForwardEnv (opt-out)
		degraded  bool
	}{
		{"squid", false, EngineSquid, "sk-real", true},
		{"opt-out", true, EngineOurs, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := openAIProfile(t, tt.inSandbox)
			ce, err := Credentials(p, tt.engine, getenv, testPlaceholder)
			if err != nil {
				t.Fatal(err)
			}
			if got := envMap(ce.Agent)["OPENAI_API_KEY"].Value; got != tt.agentKey {
				t.Errorf("agent OPENAI_API_KEY = %q, want %q", got, tt.agentKey)
			}
			if len(ce.Gateway) != 0 || (len(ce.Degradations) > 0) != tt.degraded || ce.Where[0].Lives != spec.LivesSandbox {
				t.Errorf("gateway %v, degradations %v, where %+v", ce.Gateway, ce.Degradations, ce.Where)
			}
			if tt.inSandbox && !strings.Contains(strings.Join(p.Containers[spec.RoleAgent].ForwardEnv, " "), "OPENAI_API_KEY") {
				t.Error("credentials_in_sandbox does not forward OPENAI_API_KEY")
			}
		})
	}
}

// TestCredentialsOneHostOneKey: a declared credential for the host the
// host's OPENAI_BASE_URL names would give that host two keys; the run
// stops before anything is created.
func TestCredentialsOneHostOneKey(t *testing.T) {
	s, err := spec.Load("t.toml", []byte(`schema_version = 1
capabilities = ["network", "openai_agents"]
allowed_domains = ["models.example.com"]

[[credentials]]
host = "models.example.com"
header = "X-Api-Key"
format = "{value}"
from_host = "MODELS_KEY"
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		return map[string]string{"OPENAI_BASE_URL": "https://models.example.com/v1"}[k]
	}
	if _, err := Credentials(p, EngineOurs, getenv, testPlaceholder); err == nil || !strings.Contains(err.Error(), "one credential") {
		t.Errorf("got %v, want a refusal of two credentials for models.example.com", err)
	}
}
