package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

// TestSandboxCommandsBadInput: every malformed input stops before anything
// is created, with the exit code the table promises. None needs Docker:
// the spec is checked first, and DOCKER_HOST points nowhere.
func TestSandboxCommandsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("schema_version = 2\ncapabilities = [\"teleport\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	runsDir := filepath.Join(dir, "runs")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"invalid spec", []string{"run", "--spec", bad, "--runs-dir", runsDir}, ExitInvalidSpec, "bad.toml:1"},
		{"missing spec", []string{"doctor", "--spec", filepath.Join(dir, "nope.toml"), "--runs-dir", runsDir}, ExitInvalidSpec, "does not exist"},
		{"zero timeout", []string{"run", "--timeout", "0s"}, ExitUsage, "--timeout 0s"},
		{"bad ready timeout", []string{"doctor", "--ready-timeout", "-1s"}, ExitUsage, "--ready-timeout"},
		{"bad timeout syntax", []string{"test-sandbox", "--timeout", "soon"}, ExitUsage, "invalid argument"},
		{"missing baseline", []string{"test-sandbox", "--baseline", filepath.Join(dir, "none.json")}, ExitUsage, "--baseline"},
		{"no daemon", []string{"doctor", "--runs-dir", runsDir}, ExitUnavailable, "docker"},
		{"runs show unknown", []string{"runs", "show", "run-1999", "--runs-dir", runsDir}, ExitUsage, `run "run-1999": not found`},
		{"runs show args", []string{"runs", "show", "a", "b"}, ExitUsage, "accepts at most 1 arg"},
		{"gc no daemon", []string{"gc"}, ExitUnavailable, "docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("code %d, stderr %q; want %d and %q", code, stderr, tt.wantCode, tt.wantErr)
			}
			if _, err := os.Stat(runsDir); err == nil {
				t.Errorf("a runs directory was created")
			}
		})
	}
}

func TestInterruptedIs130(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code, _ := codeOf(interrupted(ctx, nil)); code != exitInterrupted {
		t.Errorf("code %d, want %d", code, exitInterrupted)
	}
	if err := interrupted(context.Background(), nil); err != nil {
		t.Errorf("not interrupted: got %v", err)
	}
}

func TestGatewayEngineBadInput(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	runsDir := filepath.Join(dir, "runs")
	noNet := filepath.Join(dir, "nonet.toml")
	if err := os.WriteFile(noNet, []byte("schema_version = 1\ncapabilities = []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown engine", []string{"run", "--gateway-engine", "nginx", "--runs-dir", runsDir}, exitcode.Usage, `--gateway-engine "nginx": want ours or squid`},
		{"empty squid image", []string{"doctor", "--gateway-engine", "squid", "--squid-image", "", "--runs-dir", runsDir}, exitcode.Usage, "--squid-image"},
		{"test-sandbox unknown engine", []string{"test-sandbox", "--gateway-engine", "Squid", "--runs-dir", runsDir}, exitcode.Usage, "want ours or squid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("code %d, stderr %q; want %d and %q", code, stderr, tt.wantCode, tt.wantErr)
			}
			if _, err := os.Stat(runsDir); err == nil {
				t.Errorf("a runs directory was created")
			}
		})
	}
}
