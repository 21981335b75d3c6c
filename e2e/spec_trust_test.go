//go:build docker

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUntrustedSpecRefusedThenTrusted (issue 30): doctor, in a directory
// holding a sandbox_spec.toml that softens the sandbox beyond the
// built-in default (the default plus shell_access), is refused with exit
// 6 before anything is created: no run directory, no container, no
// network. After `spec trust` the same command in the same directory runs
// the whole lifecycle to exit 0. The trust store is the test's own
// (XDG_CONFIG_HOME).
func TestUntrustedSpecRefusedThenTrusted(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	work := t.TempDir()
	def, err := exec.Command(Binary(t), "spec", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(def), `"openai_agents",`, `"openai_agents", "shell_access",`, 1)
	if text == string(def) {
		t.Fatalf("the default spec has no openai_agents line to extend:\n%s", def)
	}
	if err := os.WriteFile(filepath.Join(work, "sandbox_spec.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "MCPSIDECAR_TRUST_SPEC="}
	inWork := func(args ...string) (*CLI, int) {
		c := NewCLI(t, id, env, args...)
		c.Cmd.Dir = work
		return c, exitCode(t, c.Cmd.Run())
	}

	c, code := inWork("doctor", "--allow-old-engine", "--runs-dir", runsDir)
	if code != 6 || !strings.Contains(c.Stderr.String(), "mcpsidecar: refusing sandbox_spec.toml") ||
		!strings.Contains(c.Stderr.String(), "shell_access           no-spawn") ||
		!strings.Contains(c.Stderr.String(), "hint: read the spec, then trust this exact content with: mcpsidecar spec trust sandbox_spec.toml") {
		t.Fatalf("untrusted: exit %d, want 6; stderr:\n%s", code, c.Stderr.String())
	}
	if _, err := os.Stat(runsDir); !os.IsNotExist(err) {
		t.Errorf("the refused doctor created %s: %v", runsDir, err)
	}
	RequireNothingLeft(t, label)

	if c, code := inWork("spec", "trust"); code != 0 || !strings.Contains(c.Stdout.String(), "trusted: ") {
		t.Fatalf("spec trust: exit %d\n%s%s", code, c.Stdout.String(), c.Stderr.String())
	}
	c, code = inWork("doctor", "--allow-old-engine", "--quiet", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("trusted: exit %d; stderr:\n%s", code, c.Stderr.String())
	}
	hxOnlyRun(t, runsDir)
	RequireNothingLeft(t, label)
}
