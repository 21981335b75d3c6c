//go:build linux

package roles

import (
	"strings"
	"testing"
)

// TestRunUsageErrors: what the dispatcher refuses is a usage error (exit
// 2, as cobra gave), one line naming what was wrong, nothing on stdout.
func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "no command; this binary runs the sandbox's roles: agent, sidecar"},
		{[]string{"run"}, `unknown command "run"; this binary runs only the sandbox's roles`},
		{[]string{"agent", "--no-such-flag"}, "agent: unknown flag: --no-such-flag"},
		{[]string{"sidecar", "--port", "http"}, `sidecar: invalid value "http" for flag -port`},
		{[]string{"gateway", "extra"}, `unknown command "extra" for "mcpsidecar gateway"`},
		{[]string{"kube-read-output", "--dir", "/d", "--max", "1"}, "requires at least 1 arg(s), only received 0"},
		{[]string{"kube-layer", "dial"}, "accepts 1 arg(s), received 0"},
		{[]string{"kube-layer", "wait"}, `unknown command "wait" for "mcpsidecar kube-layer"`},
		{[]string{"hold-release", "--file", "rel"}, "hold-release: --file must be an absolute path"},
		{[]string{"launch"}, "launch: no command"},
		{[]string{"netguard", "--allow", "nonsense"}, "netguard: "},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, stderr := run(t, tt.args...)
			if code != exitUsage || !strings.HasPrefix(stderr, "mcpsidecar: ") || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want %d and one line with %q", code, stderr, exitUsage, tt.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// TestParseAsCobra: flags after arguments, --flag=v, and "--" ending the
// flags, as the host writes command lines (kube.ReadArgs puts the names
// after "--"; kube.CheckLayers the timeout after the address).
func TestParseAsCobra(t *testing.T) {
	var dir string
	var max int64
	f := newFlags("x", "", Streams{})
	f.StringVar(&dir, "dir", "", "")
	f.Int64Var(&max, "max", 0, "")
	rest, err := f.parse([]string{"a", "--dir=/d", "b", "--max", "7", "--", "--dir", "c"})
	if err != nil || dir != "/d" || max != 7 || strings.Join(rest, " ") != "a b --dir c" {
		t.Errorf("parse: dir %q max %d rest %q (%v)", dir, max, rest, err)
	}
}

// TestHelp: -h and --help print the command's help on stdout and exit 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"agent", "--help"}, {"await-ready", "-h"}, {"kube-layer"}} {
		code, out, stderr := run(t, args...)
		if code != exitOK || !strings.HasPrefix(out, "Usage: mcpsidecar "+args[0]) || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	if _, out, _ := run(t, "agent", "--help"); !strings.Contains(out, "-max-turns") || !strings.Contains(out, "SANDBOX_AGENT_CONTAINER=1") {
		t.Errorf("agent's help lacks its flags or text:\n%s", out)
	}
}
