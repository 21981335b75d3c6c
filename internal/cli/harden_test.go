package cli

import (
	"errors"
	"io"
	"strings"
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

func TestSelftestChecks(t *testing.T) {
	none := func(string) string { return "" }
	got, err := selftestChecks("", none)
	if err != nil || len(got) != 5 {
		t.Fatalf("default checks: got %d, %v; want 5", len(got), err)
	}
	got, err = selftestChecks(`[{"name":"r","action":"read","arg":"/etc/passwd","want":"ok"}]`, none)
	if err != nil || len(got) != 1 || got[0].Arg != "/etc/passwd" {
		t.Fatalf("flag checks: got %+v, %v", got, err)
	}
	if _, err := selftestChecks(`[{`, none); err == nil {
		t.Fatal("malformed --checks accepted")
	} else if code, _ := codeOf(err); code != ExitUsage {
		t.Errorf("got exit code %d, want %d", code, ExitUsage)
	}
}

func TestSelftestVerdict(t *testing.T) {
	if err := selftestVerdict([]harden.CheckResult{{Pass: true}}); err != nil {
		t.Errorf("all passed: got %v", err)
	}
	err := selftestVerdict([]harden.CheckResult{{Check: harden.Check{Name: "ptrace", Want: "denied"}, Got: "ok"}})
	var ee *exitError
	if !errors.As(err, &ee) || ee.Code != ExitViolation || !strings.Contains(err.Error(), "ptrace (got ok, want denied)") {
		t.Errorf("got %v, want exit %d naming ptrace", err, ExitViolation)
	}
}
