//go:build linux

package probe

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseContextDefaults(t *testing.T) {
	got, err := ParseContext(nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultContext(), got); diff != "" {
		t.Errorf("empty context mismatch (-want +got):\n%s", diff)
	}
	if got.AllowedDirectory != "/sandbox-work/allowed" || len(got.WritablePaths) != 3 {
		t.Errorf("defaults: %+v", got)
	}
}

func TestParseContextRejects(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not json", "{", "decoding probe context"},
		{"unknown field", `{"capabilites": []}`, `unknown field "capabilites"`},
		{"wrong type", `{"capabilities": "network"}`, "capabilities"},
		{"wrong schema", `{"schema": "v0"}`, `schema "v0"`},
		{"real denied domain", `{"denied_domain": "example.net"}`, "denied_domain"},
		{"real dns exfiltration domain", `{"dns_exfiltration_domain": "evil.com"}`, "dns_exfiltration_domain"},
		{"public host address", `{"host_addresses": ["1.1.1.1"]}`, `host_addresses "1.1.1.1"`},
		{"malformed host address", `{"host_addresses": ["host"]}`, `host_addresses "host"`},
		{"relative path", `{"writable_paths": ["tmp"]}`, `"tmp": must be an absolute path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseContext([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestContextCapabilities(t *testing.T) {
	c, err := ParseContext([]byte(`{"capabilities": ["network", "openai_agents", "shell_access"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.ShellAccess() || !c.ForwardsModelKey() || c.Has("crewai") {
		t.Errorf("capabilities misread: %+v", c.Capabilities)
	}
}

func TestReservedAndAllowlist(t *testing.T) {
	for _, tt := range []struct {
		host string
		want bool
	}{{"a.invalid", true}, {"x.test.", true}, {"EXAMPLE", true}, {"example.com", false}, {"invalid.com", false}} {
		if got := reservedName(tt.host); got != tt.want {
			t.Errorf("reservedName(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
	rules := []string{".openai.com", "learn.microsoft.com", "*.example.org"}
	for _, tt := range []struct {
		host string
		want bool
	}{{"api.openai.com", true}, {"openai.com", true}, {"learn.microsoft.com", true}, {"x.learn.microsoft.com", false},
		{"a.example.org", true}, {"evilopenai.com", false}} {
		if got := domainAllowed(rules, tt.host); got != tt.want {
			t.Errorf("domainAllowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}
