package cli

import (
	"io"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

// TestHardenRoleWithoutPolicy covers the paths that never restrict the test
// process: no policy (host use, or refusal where one is required) and a
// malformed policy, which must never mean "run unhardened".
func TestHardenRoleWithoutPolicy(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		required bool
		wantCode int // -1: no error
	}{
		{"host use, nothing applied", "", false, -1},
		{"agent refuses without a policy", "", true, ExitUsage},
		{"malformed policy", "{not json", false, ExitUsage},
		{"invalid policy", `{"schema":"mcpsidecar.harden/v1","role":"","landlock":{}}`, true, ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == harden.EnvPolicy {
					return tt.value
				}
				return ""
			}
			err := hardenRole("agent", getenv, io.Discard, tt.required, "")
			if tt.wantCode < 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatal("got no error")
			}
			if code, _ := codeOf(err); code != tt.wantCode {
				t.Errorf("got exit code %d, want %d (%v)", code, tt.wantCode, err)
			}
		})
	}
}
