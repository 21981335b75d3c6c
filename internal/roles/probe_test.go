//go:build linux

package roles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProbeCmdRefuses(t *testing.T) {
	out := t.TempDir()
	tests := []struct {
		name      string
		container string
		context   string
		policy    string
		want      string
	}{
		{"outside the sandbox", "", "", "", "SANDBOX_AGENT_CONTAINER"},
		{"malformed context", "1", `{"capabilites": []}`, "", `unknown field "capabilites"`},
		{"context naming a real domain", "1", `{"denied_domain": "example.net"}`, "", "denied_domain"},
		{"no hardening policy", "1", "", "", "refusing to run unhardened"},
		{"malformed hardening policy", "1", "", "{", "MCPSIDECAR_HARDEN_POLICY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SANDBOX_AGENT_CONTAINER", tt.container)
			t.Setenv("MCPSIDECAR_PROBE_CONTEXT", tt.context)
			t.Setenv("MCPSIDECAR_HARDEN_POLICY", tt.policy)
			code, _, stderr := run(t, "probe", "--out", out)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("code %d, stderr %q; want %d and %q", code, stderr, exitUsage, tt.want)
			}
			if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
				t.Error("a refused probe wrote report.json")
			}
		})
	}
}
