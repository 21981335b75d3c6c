//go:build docker

package e2e

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/enginever"
)

// envRelay makes TestEngineRelayHelper a relay: "LISTEN,TARGET", two unix
// socket paths.
const envRelay = "MCPSIDECAR_E2E_RELAY"

// TestEngineRelayHelper is not a test: run by TestEngineNotLocal (in a
// pid namespace of its own), it serves the engine's API on a unix socket
// by relaying every connection to the engine's socket, so the engine
// seems to be in another pid namespace than this host's.
func TestEngineRelayHelper(t *testing.T) {
	listen, target, ok := strings.Cut(os.Getenv(envRelay), ",")
	if !ok {
		return
	}
	ln, err := net.Listen("unix", listen)
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", target)
			if err != nil {
				return
			}
			defer u.Close()
			go io.Copy(u, c)
			io.Copy(c, u)
		}()
	}
}

// TestEngineNotLocal: doctor against an engine whose socket is served from
// another pid namespace (the relay) decides the engine is not local and
// acts on no process it names. By default the run goes through the
// engine alone (docs/engine-only.md): output volumes, readiness, route
// removal and outside observation by helpers in the roles' namespaces;
// it passes, recorded as not local. With host directories forced
// (MCPSIDECAR_OUTPUT=bind), on an engine older than 26 it refuses the
// run before creating anything (the default routes could not be removed
// safely); on a newer one it runs with the engine's word for readiness
// and fails the outside observations with the reason. This host's routes
// are the same after each.
func TestEngineNotLocal(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
		t.Fatalf("this test needs root and unshare(1) to serve the engine's socket from another pid namespace (%v)", err)
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	relay := exec.Command("unshare", "--pid", "--fork", "--kill-child", os.Args[0], "-test.run=^TestEngineRelayHelper$")
	relay.Env = append(os.Environ(), envRelay+"="+sock+",/var/run/docker.sock")
	t.Cleanup(func() {
		if relay.Process != nil {
			relay.Process.Kill()
			relay.Wait()
		}
	})
	if err := relay.Start(); err != nil {
		t.Fatalf("starting the relay: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay's socket did not appear")
		}
	}
	routes := hostRoutes(t)
	version := strings.TrimSpace(docker(t, "version", "--format", "{{.Server.Version}}"))

	engineOnly := filepath.Join(t.TempDir(), "engine-only")
	c, code := RunCLI(t, id, []string{"DOCKER_HOST=unix://" + sock}, "doctor", "--allow-old-engine", "--runs-dir", engineOnly)
	if code != 0 {
		t.Errorf("doctor through the engine alone exited %d\n%s", code, c.Stderr.String())
	}
	engineOnlyRecord(t, hxOnlyRun(t, engineOnly))
	RequireNothingLeft(t, label)

	c, code = RunCLI(t, id, []string{"DOCKER_HOST=unix://" + sock, "MCPSIDECAR_ALLOW_EXEC_OUTPUT=1", "MCPSIDECAR_OUTPUT=bind"},
		"doctor", "--allow-old-engine", "--runs-dir", runsDir)
	stderr := c.Stderr.String()
	if !strings.Contains(stderr, "the engine's process is not on this host") || !strings.Contains(stderr, "runs in a pid namespace below this host's") {
		t.Errorf("stderr does not give the locality reason:\n%s", stderr)
	}
	if enginever.Before(version, enginever.Min) {
		if code != 5 || !strings.Contains(stderr, "default route") {
			t.Errorf("exit %d, want 5 refusing the route removal\n%s", code, stderr)
		}
		if cs, ns := Leftovers(t, label); len(cs)+len(ns) > 0 {
			t.Errorf("created containers %v and networks %v", cs, ns)
		}
	} else {
		notLocalRecord(t, hxOnlyRun(t, runsDir), code)
	}
	if got := hostRoutes(t); got != routes {
		t.Errorf("this host's routes changed:\nbefore\n%s\nafter\n%s", routes, got)
	}
	RequireNothingLeft(t, label)
}

// engineOnlyRecord checks the record of a run through the engine alone on
// an engine that is not local: recorded so, readiness by helpers, each
// role observed hardened by a helper, no default route.
func engineOnlyRecord(t *testing.T, runDir string) {
	t.Helper()
	m := readRunMetadata(t, runDir)
	if m.Engine.Local || !strings.Contains(m.Engine.Locality, "pid namespace") || !m.Verdict.OK {
		t.Errorf("engine %+v, verdict %v: want not local, with the reason, and a passing verdict", m.Engine, m.Verdict.OK)
	}
	for _, role := range []string{"gateway", "sidecar", "agent"} {
		if ob := m.Observed[role]; !ob.Seen || ob.Seccomp != 2 || ob.SeccompFilters < 2 || !ob.NoNewPrivs {
			t.Errorf("%s observed %+v, want seen hardened through a helper", role, ob)
		}
	}
	for _, c := range m.Verdict.Checks {
		if c.Name == "no route out" && !c.OK {
			t.Errorf("no route out: %s", c.Detail)
		}
	}
	start, err := os.ReadFile(filepath.Join(runDir, "gateway-start-results.json"))
	if err != nil || !strings.Contains(string(start), "helper container in the container's network namespace") {
		t.Errorf("gateway start results: %s, %v", start, err)
	}
}

// notLocalRecord checks the record of a run on an engine that is not
// local: recorded so, readiness by the engine's word, each role's outside
// observation failed with the reason.
func notLocalRecord(t *testing.T, runDir string, code int) {
	t.Helper()
	m := readRunMetadata(t, runDir)
	if code == 0 || m.Engine.Local || !strings.Contains(m.Engine.Locality, "pid namespace") {
		t.Errorf("exit %d, engine %+v: want a failed verdict and the engine recorded as not local", code, m.Engine)
	}
	for _, role := range []string{"gateway", "sidecar", "agent"} {
		ob := m.Observed[role]
		if ob.Seen || !strings.Contains(ob.Unproven, "not on this host") {
			t.Errorf("%s observed %+v, want unproven", role, ob)
		}
	}
	start, err := os.ReadFile(filepath.Join(runDir, "gateway-start-results.json"))
	if err != nil || !strings.Contains(string(start), "the engine's report that the container runs") {
		t.Errorf("gateway start results: %s, %v", start, err)
	}
}

// hostRoutes is this host's IPv4 and IPv6 routing tables.
func hostRoutes(t *testing.T) string {
	t.Helper()
	var out strings.Builder
	for _, f := range []string{"/proc/net/route", "/proc/net/ipv6_route"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	return out.String()
}
