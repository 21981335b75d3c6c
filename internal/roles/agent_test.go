//go:build linux

package roles

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The agent refuses to run on the host (no sandbox marker), as a usage
// error with a hint, before reading any other configuration.
func TestAgentRefusesOutsideSandbox(t *testing.T) {
	for _, args := range [][]string{{"agent"}, {"agent", "--check"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Setenv("SANDBOX_AGENT_CONTAINER", "")
			var out, errb bytes.Buffer
			code := Run(context.Background(), args, Streams{Out: &out, Err: &errb})
			if code != exitUsage || !strings.Contains(errb.String(), "SANDBOX_AGENT_CONTAINER is not 1") ||
				!strings.Contains(errb.String(), "hint: run the agent through: mcpsidecar run") {
				t.Errorf("exit %d, stderr %q; want %d with the guard's message and hint", code, errb.String(), exitUsage)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want empty", out.String())
			}
		})
	}
}

// Inside the sandbox, the agent still refuses to run without a hardening
// policy, and a bad configuration is a usage error naming the variable.
func TestAgentRefusals(t *testing.T) {
	tests := []struct {
		name, baseURL, wantErr string
	}{
		{"no harden policy", "", "MCPSIDECAR_HARDEN_POLICY is not set; refusing to run unhardened"},
		{"bad base URL", "api.openai.com", "OPENAI_BASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := agentOutputDir
			agentOutputDir = t.TempDir()
			t.Cleanup(func() { agentOutputDir = old })
			t.Setenv("SANDBOX_AGENT_CONTAINER", "1")
			t.Setenv("MCPSIDECAR_HARDEN_POLICY", "")
			t.Setenv("OPENAI_BASE_URL", tt.baseURL)
			var out, errb bytes.Buffer
			code := Run(context.Background(), []string{"agent"}, Streams{Out: &out, Err: &errb})
			if code != exitUsage || !strings.Contains(errb.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d naming %q", code, errb.String(), exitUsage, tt.wantErr)
			}
		})
	}
}

func TestAgentBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"agent", "--max-turns", "many"}, Streams{Out: &out, Err: &errb})
	if code != exitUsage {
		t.Errorf("exit %d, want %d (stderr %q)", code, exitUsage, errb.String())
	}
}
