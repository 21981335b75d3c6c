package agent

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	env := map[string]string{
		EnvModel: "env-model", EnvQuestion: "env question?", EnvBaseURL: "http://fake-model.e2e.test/v1",
		"HTTPS_PROXY": "http://egress-gateway:3128", "HTTP_PROXY": "http://egress-gateway:3128", "NO_PROXY": "mcp-sidecar,localhost",
	}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name             string
		opts             Options
		wantModel, wantQ string
		wantErr          string
	}{
		{"env", Options{}, "env-model", "env question?", ""},
		{"flags win", Options{Model: "m", Question: "q?"}, "m", "q?", ""},
		{"max turns", Options{MaxTurns: 101}, "", "", "max turns 101"},
		{"timeout", Options{RequestTimeout: time.Millisecond}, "", "", "request timeout 1ms"},
		{"blank question", Options{Question: " "}, "", "", "question is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadConfig(tt.opts, getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || c.Model != tt.wantModel || c.Question != tt.wantQ {
				t.Fatalf("LoadConfig = %+v, %v; want model %q question %q", c, err, tt.wantModel, tt.wantQ)
			}
			if c.SidecarURL != DefaultSidecarURL || c.MaxTurns != DefaultMaxTurns || c.OutputDir != DefaultOutputDir {
				t.Errorf("defaults not applied: %+v", c)
			}
		})
	}
}

func TestLoadConfigDefaultsAndURLs(t *testing.T) {
	c, err := LoadConfig(Options{}, func(string) string { return "" })
	if err != nil || c.Model != DefaultModel || c.BaseURL != DefaultBaseURL || c.Question != DefaultQuestion {
		t.Fatalf("LoadConfig = %+v, %v", c, err)
	}
	_, err = LoadConfig(Options{}, func(k string) string {
		return map[string]string{EnvSidecarURL: "mcp-sidecar:8000", EnvBaseURL: "file:///etc/passwd"}[k]
	})
	for _, want := range []string{EnvSidecarURL, EnvBaseURL} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to name %s", err, want)
		}
	}
}

// The proxy function is read from the given environment, once: the model
// API goes through the gateway, the sidecar (NO_PROXY) does not.
func TestProxyFromEnv(t *testing.T) {
	env := map[string]string{"HTTPS_PROXY": "http://egress-gateway:3128", "HTTP_PROXY": "http://egress-gateway:3128", "NO_PROXY": "mcp-sidecar,localhost,127.0.0.1"}
	proxy := proxyFromEnv(func(k string) string { return env[k] })
	tests := []struct{ target, want string }{
		{"https://api.openai.com/v1/chat/completions", "http://egress-gateway:3128"},
		{"http://fake-model.e2e.test/v1/chat/completions", "http://egress-gateway:3128"},
		{"http://mcp-sidecar:8000/mcp", ""},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.target)
		got, err := proxy(u)
		gotS := ""
		if got != nil {
			gotS = got.String()
		}
		if err != nil || gotS != tt.want {
			t.Errorf("proxy(%s) = %q, %v; want %q", tt.target, gotS, err, tt.want)
		}
	}
}

func TestCheckSandbox(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, marker, dir, wantErr string
	}{
		{"inside", "1", dir, ""},
		{"no marker", "", dir, "SANDBOX_AGENT_CONTAINER is not 1"},
		{"marker true", "true", dir, "SANDBOX_AGENT_CONTAINER is not 1"},
		{"no output dir", "1", dir + "/missing", "output directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSandbox(func(k string) string { return map[string]string{EnvInSandbox: tt.marker}[k] }, tt.dir)
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("CheckSandbox = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
