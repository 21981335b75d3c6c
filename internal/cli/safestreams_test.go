package cli

import (
	"strings"
	"testing"
)

// What a host command prints is cleaned of control sequences (here a path
// in an error message); an in-container role's output is left as it is.
func TestHostOutputIsCleaned(t *testing.T) {
	_, _, errs := runCLI(t, "spec", "check", "--spec", "/nonexistent/x\x1b[2J\x1b]0;t\x07.toml")
	if strings.ContainsAny(errs, "\x1b\x07") || !strings.Contains(errs, `x\x1b[2J\x1b]0;t\x07.toml`) {
		t.Errorf("stderr not cleaned: %q", errs)
	}
	if s := safeStreams([]string{"agent"}, Streams{}); s.Out != nil || s.Err != nil {
		t.Error("the agent's streams were wrapped: its stdout is its answer, byte for byte")
	}
}
