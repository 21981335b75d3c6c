//go:build linux

package cli

import (
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/kube"
)

// TestKubeCommandsHidden: the hidden commands are in the product binary
// and absent from its help.
func TestKubeCommandsHidden(t *testing.T) {
	root := newRootCmd(Streams{})
	for _, name := range []string{kube.HoldCommand, kube.StopCommand, kube.ReadCommand} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name || !c.Hidden {
			t.Errorf("%s: found %v (%v), want a hidden command", name, c, err)
		}
	}
	help := helpTexts(t)
	for _, name := range []string{kube.HoldCommand, kube.StopCommand, kube.ReadCommand} {
		if strings.Contains(help, name) {
			t.Errorf("help names %s", name)
		}
	}
}

// TestRoleCommandsDelegate: the host binary runs a role's command line
// through internal/roles, with its flags, messages and exit codes, and
// lists the four roles in its help.
func TestRoleCommandsDelegate(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"agent", "--max-turns", "many"}, ExitUsage, `agent: invalid value "many" for flag -max-turns`},
		{[]string{"gateway", "--no-such-flag"}, ExitUsage, "gateway: unknown flag: --no-such-flag"},
		{[]string{"sidecar", "extra"}, ExitUsage, `unknown command "extra" for "mcpsidecar sidecar"`},
		{[]string{"await-ready", "--port", "0"}, ExitUsage, "await-ready: a --port and a --path starting with / (or --tcp) are required"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, stderr := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "mcpsidecar: ") != 1 {
				t.Errorf("exit %d, stderr %q; want %d and one line with %q", code, stderr, tt.code, tt.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
	code, out, _ := run(t, "--help")
	for _, role := range []string{"agent", "sidecar", "gateway", "probe"} {
		if code != ExitOK || !strings.Contains(out, "\n  "+role+" ") {
			t.Errorf("help (exit %d) does not list the role %s:\n%s", code, role, out)
		}
	}
}
