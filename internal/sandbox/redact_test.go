package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// TestForwardEnvSecrets: only secret-named variables (and a password in a
// URL) are redaction secrets; every forwarded variable reaches the agent.
func TestForwardEnvSecrets(t *testing.T) {
	host := map[string]string{
		"OPENAI_API_KEY":  "sk-live-123456",
		"OPENAI_MODEL":    "fake-model",
		"OPENAI_BASE_URL": "https://bot:hunter2pw@model.e2e.test/v1",
		"GITHUB_TOKEN":    "ghp_abcdefgh",
		"DB_PASSWORD":     "pw",
		"MY_Auth_Header":  "Bearer xyz-long-value",
		"REGION":          "eu-west-1-long",
		"EMPTY_SECRET":    "",
	}
	names := []string{"OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL", "GITHUB_TOKEN", "DB_PASSWORD", "MY_Auth_Header", "REGION", "EMPTY_SECRET"}
	env, secrets := forwardEnv(names, func(k string) string { return host[k] })
	wantEnv := []dockerx.EnvVar{
		{Name: "OPENAI_API_KEY", Value: "sk-live-123456", Secret: true},
		{Name: "OPENAI_MODEL", Value: "fake-model"},
		{Name: "OPENAI_BASE_URL", Value: "https://bot:hunter2pw@model.e2e.test/v1"},
		{Name: "GITHUB_TOKEN", Value: "ghp_abcdefgh", Secret: true},
		{Name: "DB_PASSWORD", Value: "pw", Secret: true},
		{Name: "MY_Auth_Header", Value: "Bearer xyz-long-value", Secret: true},
		{Name: "REGION", Value: "eu-west-1-long"},
	}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	wantSecrets := []string{"sk-live-123456", "hunter2pw", "ghp_abcdefgh", "pw", "Bearer xyz-long-value"}
	if diff := cmp.Diff(wantSecrets, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
}

// TestRedact: secrets never survive; non-secret values and text that
// merely contains a short secret do.
func TestRedact(t *testing.T) {
	host := map[string]string{"OPENAI_API_KEY": "sk-live-123456", "OPENAI_MODEL": "fake-model",
		"OPENAI_BASE_URL": "http://fake-model.e2e.test:8080/v1", "SHORT_TOKEN": "ab1"}
	_, secrets := forwardEnv([]string{"OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL", "SHORT_TOKEN"},
		func(k string) string { return host[k] })
	j := &job{secrets: secrets}
	r := dockerx.Redacted
	tests := []struct{ name, in, want string }{
		{"api key", "Authorization: Bearer sk-live-123456\n", "Authorization: Bearer " + r + "\n"},
		{"api key inside text", "xsk-live-123456y", "x" + r + "y"},
		{"model name kept", `{"model":"fake-model"}`, `{"model":"fake-model"}`},
		{"hostname kept", "CONNECT fake-model.e2e.test:8080", "CONNECT fake-model.e2e.test:8080"},
		{"base url kept", "base http://fake-model.e2e.test:8080/v1", "base http://fake-model.e2e.test:8080/v1"},
		{"short secret as a token", "token=ab1\n", "token=" + r + "\n"},
		{"short secret at both ends", "ab1 and ab1", r + " and " + r},
		{"short secret inside words kept", "cab1 ab12 xab1y", "cab1 ab12 xab1y"},
		{"short secret mixed", "ab1ab1 ab1", "ab1ab1 " + r},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(j.redact([]byte(tt.in))); got != tt.want {
				t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
