package verdict

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

func TestCheckHost(t *testing.T) {
	seed := []string{".example.com", ".gov.uk", ".microsoft.com", ".openai.com"}
	tests := []struct {
		name     string
		domains  []string
		ips      []string
		env      map[string]string
		wantErr  string // "" = accepted
		wantHint string
	}{
		{"default base URL covered", seed, nil, map[string]string{agent.EnvAPIKey: "k"}, "", ""},
		{"fixture host covered", []string{"fake-model.e2e.test"}, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://fake-model.e2e.test/v1"}, "", ""},
		{"subdomain rule", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "https://eu.api.openai.com/v1"}, "", ""},
		{"a port entry", []string{"models.lan:11434"}, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://models.lan:11434/v1"}, "", ""},
		{"the Docker host", []string{"host.docker.internal:11434"}, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://host.docker.internal:11434/v1"}, "", ""},
		{"an IP entry with a port", nil, []string{"192.168.1.20:8000"}, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://192.168.1.20:8000/v1"}, "", ""},
		{"missing key", seed, nil, map[string]string{}, "OPENAI_API_KEY is not set", "export OPENAI_API_KEY"},
		{"host not covered", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "https://llm.internal.example.net/v1"},
			"does not allow llm.internal.example.net on port 443", `add "llm.internal.example.net" to allowed_domains in the spec`},
		{"default not covered", []string{".example.com"}, nil, map[string]string{agent.EnvAPIKey: "k"}, "api.openai.com", `add "api.openai.com" to allowed_domains`},
		{"not a URL", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "api.openai.com/v1"}, "not an absolute http or https URL", "set OPENAI_BASE_URL to the server's /v1 URL"},
		{"ftp scheme", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "ftp://api.openai.com/v1"}, "not an absolute http or https URL", "set OPENAI_BASE_URL"},
		{"a port the entry does not name", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://ollama.example.com:11434/v1"},
			"on port 11434", `add "ollama.example.com:11434" to allowed_domains in the spec`},
		{"https on 80", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "https://api.openai.com:80/v1"}, "on port 80", `add "api.openai.com:80" to allowed_domains`},
		{"an IP not covered", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://192.168.1.20:8000/v1"}, "192.168.1.20 on port 8000", `add "192.168.1.20:8000" to allowed_ip_addresses`},
		{"localhost", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://localhost:11434/v1"}, `host "localhost" is the agent's own container`,
			`use http://host.docker.internal:11434/v1 and add "host.docker.internal:11434" to allowed_domains`},
		{"127.0.0.1", seed, nil, map[string]string{agent.EnvAPIKey: "k", agent.EnvBaseURL: "http://127.0.0.1:8080/v1"}, "own container", `"host.docker.internal:8080"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := netpolicy.NewConfig(tt.domains, tt.ips)
			err := CheckHost(&cfg, func(k string) string { return tt.env[k] })
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckHost: %v, want nil", err)
				}
				return
			}
			var he *HostError
			if !errors.As(err, &he) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(he.Hint, tt.wantHint) {
				t.Fatalf("CheckHost error = %v (hint %q), want one containing %q with a hint containing %q", err, hintOf(err), tt.wantErr, tt.wantHint)
			}
			if tt.env[agent.EnvAPIKey] != "" && strings.Contains(he.Hint, agent.EnvAPIKey) {
				t.Errorf("hint %q repeats the key hint although the key is set", he.Hint)
			}
		})
	}
}

func hintOf(err error) string {
	var he *HostError
	if errors.As(err, &he) {
		return he.Hint
	}
	return ""
}
