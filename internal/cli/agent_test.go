package cli

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
			if code != ExitUsage || !strings.Contains(errb.String(), "SANDBOX_AGENT_CONTAINER is not 1") ||
				!strings.Contains(errb.String(), "hint: run the agent through: mcpsidecar run") {
				t.Errorf("exit %d, stderr %q; want %d with the guard's message and hint", code, errb.String(), ExitUsage)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want empty", out.String())
			}
		})
	}
}

func TestAgentBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"agent", "--max-turns", "many"}, Streams{Out: &out, Err: &errb})
	if code != ExitUsage {
		t.Errorf("exit %d, want %d (stderr %q)", code, ExitUsage, errb.String())
	}
}
