//go:build docker

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil/enginehost"
)

// victimCount is how many of this host's pids are held around where the
// engine's process ids will land: a doctor run takes about 370 of the
// engine's pids, its roles' first processes between the 80th and the
// 220th (measured on Engine 26.1).
const victimCount = 1000

// TestEngineElsewhere (issue 32): doctor against an engine inside a
// container, reached over TCP with TLS, whose process ids are not this
// host's, while local processes of this host, each in a network namespace
// with default routes and listeners on the roles' ports, hold the very
// numbers the engine reports for the roles' processes. The host enters no
// namespace and opens no /proc/<pid> (strace), dials nothing there,
// touches no route there or here; the engine is recorded as not local and
// each check that needed a role's process fails with the reason, none
// passing as "not observed".
//
// The host's runs directory is bound into the engine's container at the
// same path (as Docker Desktop shares the user's home) so that the roles
// can write their records and the run goes through; nothing asserted
// here depends on it (without it the roles fail to write, and the
// assertions hold the same).
func TestEngineElsewhere(t *testing.T) {
	id, _, _ := hxSetup(t)
	needTools(t, "strace", "unshare", "ip")
	shared := t.TempDir()
	eng := enginehost.Start(t, enginehost.Options{TLS: true, Shared: []string{shared}})
	runsDir := filepath.Join(shared, "runs")
	r := runElsewhere(t, eng, id, "doctor", "--runs-dir", runsDir)

	if !strings.Contains(r.stderr, "the engine's process is not on this host (the engine's API is "+eng.Host+", not a unix socket on this host)") {
		t.Errorf("stderr does not give the locality reason:\n%s", r.stderr)
	}
	elsewhereRecord(t, hxOnlyRun(t, runsDir), r.code, eng.Host)
	for _, role := range []string{spec.RoleGateway, spec.RoleSidecar, spec.RoleAgent} {
		pid, ok := r.pids[role]
		switch {
		case !ok && role == spec.RoleAgent:
			t.Logf("the agent ended before its pid could be read from the engine")
		case !ok:
			t.Errorf("the engine never reported a process id for the %s (containers seen: %v)", role, r.pids)
		case !r.victims.stillHeld(pid):
			t.Errorf("the engine reported pid %d for the %s: not held by a local victim throughout (victims hold %d..%d, %d of them)",
				pid, role, r.victims.first, r.victims.first+r.victims.count-1, len(r.victims.held))
		default:
			t.Logf("the %s's pid as the engine reports it, %d (the engine's pid count since the run began + %d), is a local process of this host's", role, pid, pid-r.victims.first)
		}
	}
	r.checkUntouched(t)
	if left := eng.Docker(t, "ps", "-aq", "--filter", "label=mcpsidecar.e2e="+id); left != "" {
		t.Errorf("the run left containers on the engine: %s", left)
	}
}

// TestEngineElsewhereOld (issue 32, item 2): the same against an engine
// older than 26 (Debian 12's 20.10), reached over plain TCP, with
// --allow-old-engine: on such an engine the host would have to enter
// each internal container's network namespace to remove its default
// route, which it cannot do safely for an engine whose pids are not
// this host's; the run is refused before anything is created, and the
// local namespace that holds the engine's next pids keeps its routes.
func TestEngineElsewhereOld(t *testing.T) {
	id, _, _ := hxSetup(t)
	needTools(t, "strace", "unshare", "ip")
	shared := t.TempDir()
	eng := enginehost.Start(t, enginehost.Options{Suite: "bookworm", Shared: []string{shared}})
	runsDir := filepath.Join(shared, "runs")
	r := runElsewhere(t, eng, id, "doctor", "--allow-old-engine", "--runs-dir", runsDir)

	if r.code != 5 || !strings.Contains(r.stderr, "refused: an engine older than 26") || !strings.Contains(r.stderr, "default route") ||
		!strings.Contains(r.stderr, "the engine's process is not on this host (the engine's API is "+eng.Host+", not a unix socket on this host)") {
		t.Errorf("exit %d, want 5 refusing the route removal for the locality reason; stderr:\n%s", r.code, r.stderr)
	}
	if len(r.pids) > 0 {
		t.Errorf("containers started on the engine: %v", r.pids)
	}
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
		if left := eng.Docker(t, append(kind, "--filter", "label=mcpsidecar.e2e="+id)...); left != "" {
			t.Errorf("docker %s on the engine: the refused run created %s", kind[0], left)
		}
	}
	r.checkUntouched(t)
}

// elsewhereRun is one run of mcpsidecar against an engine elsewhere,
// with victims holding the pids the engine gives from its start on.
type elsewhereRun struct {
	code    int
	stderr  string
	pids    map[string]int // role -> the pid the engine reported
	victims *victims
	trace   string   // strace's output
	hostWas []string // this host's default routes before
}

// runElsewhere runs mcpsidecar args under strace against eng with the
// output in host directories (MCPSIDECAR_OUTPUT=bind: the host-side path
// issue 32 makes safe) and MCPSIDECAR_ALLOW_EXEC_OUTPUT=1 (output
// directories on an engine that is not local cannot be made noexec from
// here), after placing victims at this host's pids
// first..first+victimCount-1 and making the engine give its next pids
// from first on.
func runElsewhere(t *testing.T, eng *enginehost.Engine, id string, args ...string) *elsewhereRun {
	t.Helper()
	return runElsewhereEnv(t, eng, id, []string{"MCPSIDECAR_OUTPUT=bind", "MCPSIDECAR_ALLOW_EXEC_OUTPUT=1"}, args...)
}

// runElsewhereEnv is runElsewhere with env instead of its two variables.
func runElsewhereEnv(t *testing.T, eng *enginehost.Engine, id string, env []string, args ...string) *elsewhereRun {
	t.Helper()
	r := &elsewhereRun{hostWas: hostDefaultRoutes(t)}
	r.victims = startVictims(t, victimCount, spec.GatewayPort, spec.SidecarPort)
	eng.SetLastPid(t, r.victims.first-1)
	stop := watchEnginePids(t, eng, time.Now().Add(-2*time.Second))
	r.trace = filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command("strace", append([]string{"-f", "-qq", "-e", "signal=none",
		"-e", "trace=%file,setns,pidfd_open,unshare", "-o", r.trace, Binary(t)}, args...)...)
	cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS="+TestLabel+",mcpsidecar.e2e="+id)
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, eng.Env...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	r.code = exitCode(t, cmd.Run())
	r.stderr = stderr.String()
	r.pids = stop()
	t.Logf("mcpsidecar %s against %s: exit %d in %s", args[0], eng.Host, r.code, time.Since(start).Round(time.Millisecond))
	return r
}

// checkUntouched: the host made no setns or unshare call, held no process
// and read no /proc/<pid> but its own; the victims' routes are as they
// were and their listeners saw no connection; this host's routes are as
// they were.
func (r *elsewhereRun) checkUntouched(t *testing.T) {
	t.Helper()
	checkTrace(t, r.trace)
	before, after, conns := r.victims.finish(t)
	if before != after {
		t.Errorf("the victims' routes changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	if v4, v6 := defaultRoutes(after); len(v4) != 1 || len(v6) != 1 {
		t.Errorf("the victims' namespace has lost a default route:\n%s", after)
	}
	if len(conns) > 0 {
		t.Errorf("the host dialed the victims' listeners, %d times: first %s", len(conns), conns[0])
	}
	if got := hostDefaultRoutes(t); !slices.Equal(got, r.hostWas) {
		t.Errorf("this host's default routes changed: before %q, after %q", r.hostWas, got)
	}
}

// elsewhereRecord checks the record of a run on an engine reached at
// host: recorded as not local for that reason, each role's outside
// observation unproven for it, each check over one failed with it, and no
// check passed on something not observed.
func elsewhereRecord(t *testing.T, runDir string, code int, host string) {
	t.Helper()
	m := readRunMetadata(t, runDir)
	if code == 0 || m.Engine.Local || !strings.Contains(m.Engine.Locality, host+", not a unix socket on this host") {
		t.Errorf("exit %d, engine %+v: want a failed verdict and the engine recorded as not local, reached at %s", code, m.Engine, host)
	}
	for _, role := range []string{spec.RoleGateway, spec.RoleSidecar, spec.RoleAgent} {
		if ob, ok := m.Observed[role]; !ok || ob.Seen || !strings.Contains(ob.Unproven, "not on this host") {
			t.Errorf("%s observed %+v (recorded: %v), want unproven: not on this host", role, ob, ok)
		}
		name := role + " hardening seen from outside"
		c, ok := findCheck(m.Verdict.Checks, name)
		if !ok || c.OK || !strings.Contains(c.Detail, "not on this host") {
			t.Errorf("check %q: %+v (present: %v), want failed: not on this host", name, c, ok)
		}
	}
	for _, c := range m.Verdict.Checks {
		if c.OK && strings.Contains(c.Detail, "not observed") {
			t.Errorf("check %q passed on something not observed: %s", c.Name, c.Detail)
		}
	}
}

func findCheck(checks []runs.Check, name string) (runs.Check, bool) {
	for _, c := range checks {
		if c.Name == name {
			return c, true
		}
	}
	return runs.Check{}, false
}

// watchEnginePids follows the engine's container starts from since on
// (its API's event stream) and reads, right away, the pid the engine
// reports for each: a role's process as the host would read it. stop
// ends the watch and returns role -> pid; a role that ended before its
// inspection is missing.
func watchEnginePids(t *testing.T, eng *enginehost.Engine, since time.Time) (stop func() map[string]int) {
	t.Helper()
	client, base := eng.API()
	ctx, cancel := context.WithCancel(context.Background())
	filters := url.QueryEscape(`{"type":["container"],"event":["start"]}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("%s/events?since=%d&filters=%s", base, since.Unix(), filters), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("following the engine's events: %v", err)
	}
	var mu sync.Mutex
	pids := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct{ ID string }
			if dec.Decode(&ev) != nil {
				return
			}
			role, pid := inspectPid(ctx, client, base, ev.ID)
			if pid > 0 {
				mu.Lock()
				pids[role] = pid
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop = func() map[string]int {
		once.Do(func() {
			time.Sleep(500 * time.Millisecond) // the last start's inspection
			cancel()
			<-done
		})
		mu.Lock()
		defer mu.Unlock()
		return pids
	}
	t.Cleanup(func() { stop() })
	return stop
}

// inspectPid is the role label of container id and the pid the engine
// reports for it (0 once it has ended).
func inspectPid(ctx context.Context, client *http.Client, base, id string) (role string, pid int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/containers/"+id+"/json", nil)
	if err != nil {
		return "", 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0
	}
	defer resp.Body.Close()
	var c struct {
		State  struct{ Pid int }
		Config struct{ Labels map[string]string }
	}
	if json.NewDecoder(resp.Body).Decode(&c) != nil {
		return "", 0
	}
	return c.Config.Labels["mcpsidecar.role"], c.State.Pid
}

var (
	traceTid  = regexp.MustCompile(`^(\d+) `)
	traceProc = regexp.MustCompile(`"/proc/(\d+)[/"]`)
	tracePidf = regexp.MustCompile(`pidfd_open\((\d+),`)
)

// checkTrace reads strace's output of a run: no setns or unshare at all,
// and no /proc/<pid> path or pidfd_open of a pid that is not one of the
// run's own threads.
func checkTrace(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading strace's output: %v", err)
	}
	lines := strings.Split(string(data), "\n")
	own := map[string]bool{}
	for _, l := range lines {
		if m := traceTid.FindStringSubmatch(l); m != nil {
			own[m[1]] = true
		}
	}
	var bad []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, "setns("), strings.Contains(l, "unshare("):
			bad = append(bad, l)
		default:
			for _, re := range []*regexp.Regexp{traceProc, tracePidf} {
				for _, m := range re.FindAllStringSubmatch(l, -1) {
					if !own[m[1]] {
						bad = append(bad, l)
					}
				}
			}
		}
	}
	if len(own) == 0 {
		t.Errorf("strace recorded nothing of the run:\n%s", data)
	}
	for i, l := range bad {
		if i == 10 {
			t.Errorf("... and %d more such calls", len(bad)-i)
			break
		}
		t.Errorf("the run used a process that is not its own: %s", l)
	}
}

// hostDefaultRoutes is this host's default routes, IPv4 then IPv6 (other
// routes come and go with the networks other tests create).
func hostDefaultRoutes(t *testing.T) []string {
	t.Helper()
	v4, v6 := defaultRoutes(routeTable(hostRoutes(t)))
	return append(v4, v6...)
}

// needTools fails the test when a command it needs is missing.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root")
	}
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("this test needs %s (scripts/setup.sh installs it): %v", n, err)
		}
	}
}
