package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubnetPoolFlag: a bad pool is a usage error naming the flag and the
// variable, on every sandbox command, before anything is created.
func TestSubnetPoolFlag(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	runsDir := filepath.Join(dir, "runs")
	tests := []struct {
		name    string
		env     string
		args    []string
		wantErr string
	}{
		{"not CIDR", "", []string{"run", "--subnet-pool", "10.213.0.0"}, "CIDR notation"},
		{"too small for two /28s", "", []string{"doctor", "--subnet-pool", "10.213.0.0/28"}, "/27 or larger"},
		{"public", "", []string{"test-sandbox", "--subnet-pool", "8.8.0.0/16"}, "private range"},
		{"from the environment", "172.29.0.1/16", []string{"doctor"}, "did you mean 172.29.0.0/16"},
		{"the flag wins over the environment", "nonsense", []string{"doctor", "--subnet-pool", "fd00::/48"}, "IPv4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envSubnetPool, tt.env)
			code, _, stderr := run(t, append(tt.args, "--runs-dir", runsDir)...)
			for _, want := range []string{"--subnet-pool", envSubnetPool, tt.wantErr} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not contain %q", stderr, want)
				}
			}
			if code != ExitUsage {
				t.Errorf("code %d, want %d", code, ExitUsage)
			}
			if _, err := os.Stat(runsDir); err == nil {
				t.Errorf("a runs directory was created")
			}
		})
	}
}
