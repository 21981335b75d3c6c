//go:build docker

package e2e

// Issue 29 against an engine elsewhere (a Docker engine in a container of
// ours, over TLS or TCP: its processes, mounts and paths are not this
// host's): with nothing shared with it and no environment variable, the
// run goes through its API alone (docs/engine-only.md) and passes, with
// the same record checks; the host enters no namespace, reads no
// /proc/<pid> and touches none of the local processes that hold the
// engine's pid numbers.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil/enginehost"
)

// engineOnlyElsewhere checks the record of a run through the engine alone
// on an engine elsewhere: not local, verdict passed, every role observed
// hardened by a helper, the bridge checked on the engine's side, no
// default route, nothing left on the engine (volumes and helpers too).
func engineOnlyElsewhere(t *testing.T, eng *enginehost.Engine, id, runDir string, code int, stderr string) {
	t.Helper()
	if code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	m := readRunMetadata(t, runDir)
	if m.Engine.Local || !strings.Contains(m.Engine.Locality, eng.Host+", not a unix socket on this host") || !m.Verdict.OK {
		t.Errorf("engine %+v, verdict %v: want not local (reached at %s) and a passing verdict", m.Engine, m.Verdict.OK, eng.Host)
	}
	for _, role := range []string{spec.RoleGateway, spec.RoleSidecar, spec.RoleAgent} {
		if ob := m.Observed[role]; !ob.Seen || ob.Seccomp != 2 || ob.SeccompFilters < 2 || !ob.NoNewPrivs || ob.UID == 0 {
			t.Errorf("%s observed %+v, want seen hardened through a helper", role, ob)
		}
	}
	bridge := false
	for _, c := range m.Verdict.Checks {
		if strings.HasPrefix(c.Name, "engine's host has no address on") {
			bridge = c.OK
		}
		if c.OK && strings.Contains(c.Detail, "not observed") {
			t.Errorf("check %q passed on something not observed: %s", c.Name, c.Detail)
		}
	}
	if !bridge {
		t.Errorf("no passing bridge check on the engine's side: %+v", m.Verdict.Checks)
	}
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		if left := eng.Docker(t, append(kind, "--filter", "label=mcpsidecar.e2e="+id)...); left != "" {
			t.Errorf("docker %s on the engine: left %s", kind[0], left)
		}
	}
}

func TestEngineElsewhereEngineOnly(t *testing.T) {
	id, _, _ := hxSetup(t)
	needTools(t, "strace", "unshare", "ip")
	eng := enginehost.Start(t, enginehost.Options{TLS: true}) // nothing shared with it
	runsDir := filepath.Join(t.TempDir(), "runs")
	r := runElsewhereEnv(t, eng, id, nil, "doctor", "--runs-dir", runsDir)
	engineOnlyElsewhere(t, eng, id, hxOnlyRun(t, runsDir), r.code, r.stderr)
	r.checkUntouched(t)
}

// TestEngineElsewhereOldEngineOnly: on an engine older than 26 the default
// route of each internal container is removed by a helper in its own
// network namespace, not refused; the local processes that hold the
// engine's pids keep theirs.
func TestEngineElsewhereOldEngineOnly(t *testing.T) {
	id, _, _ := hxSetup(t)
	needTools(t, "strace", "unshare", "ip")
	eng := enginehost.Start(t, enginehost.Options{Suite: "bookworm"})
	runsDir := filepath.Join(t.TempDir(), "runs")
	r := runElsewhereEnv(t, eng, id, nil, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	engineOnlyElsewhere(t, eng, id, hxOnlyRun(t, runsDir), r.code, r.stderr)
	if strings.Contains(r.stderr, "keeps the default route") {
		t.Errorf("a container kept its default route:\n%s", r.stderr)
	}
	r.checkUntouched(t)
}

// TestEngineElsewhereNonRoot: a user who is not root (the docker group's
// user; the engine is reached over TCP, so no socket of this host is
// used) runs doctor and test-sandbox against the engine elsewhere: both
// pass, the noexec output probe included, and the record is theirs.
func TestEngineElsewhereNonRoot(t *testing.T) {
	id, _, _ := hxSetup(t)
	u := eoUser(t)
	eng := enginehost.Start(t, enginehost.Options{})
	bin := eoUserBinary(t)
	runsDir := filepath.Join(u.HomeDir, "elsewhere-runs-"+id)
	t.Cleanup(func() { os.RemoveAll(runsDir); os.RemoveAll(runsDir + "-ts") })
	out, code := eoRunAsEnv(t, u, bin, id, eng.Env, "doctor", "--runs-dir", runsDir)
	runDir := hxOnlyRun(t, runsDir)
	engineOnlyElsewhere(t, eng, id, runDir, code, out)
	eoCheckOwned(t, runDir, u)

	out, code = eoRunAsEnv(t, u, bin, id, eng.Env, "test-sandbox", "--runs-dir", runsDir+"-ts")
	if code != 0 {
		t.Errorf("test-sandbox as %s against %s exited %d:\n%s", u.Username, eng.Host, code, hxTail(out, 3000))
	}
	eoCheckProbe(t, hxOnlyRun(t, runsDir+"-ts"), "G06", "T12")
}
