package dockerbackend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hostoutput"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

const remote = "the engine's API is tcp://10.0.0.5:2375, not a unix socket on this host"

// acceptExecOutput sets hostoutput.EnvAllowExecOutput for the rig's run.
func acceptExecOutput(r *rig) { setEnv(r, hostoutput.EnvAllowExecOutput, "1") }

// setEnv sets one variable of the rig's environment.
func setEnv(r *rig, key, value string) {
	get := r.o.Getenv
	r.o.Getenv = func(k string) string {
		if k == key {
			return value
		}
		return get(k)
	}
}

// noCreate fails the test if the run created anything.
func noCreate(t *testing.T, r *rig) {
	t.Helper()
	for _, c := range r.f.CallList() {
		if strings.HasPrefix(c, "create") {
			t.Errorf("%s: created", c)
		}
	}
}

// TestLifecycleEngineNotLocal: an engine whose process ids are not this
// host's is recorded so in run-metadata.json; nothing of its processes is
// used (no proof asked, no connection, no route touched); readiness is
// the engine's word; the checks that needed the process fail with the
// reason. The output directories can be neither made noexec nor checked
// there (MCPSIDECAR_OUTPUT=bind: unset, the output goes through the
// engine): the run stops before anything is created, unless the user
// accepts it.
func TestLifecycleEngineNotLocal(t *testing.T) {
	fakes.use(t, &fakeOverrides{})
	r := newRig(t, orchestrate.WorkloadCheck)
	r.f.NotLocal = remote
	setEnv(r, EnvOutput, "bind")
	_, err := r.run(context.Background())
	if code, hint := exitcode.Of(err); code != exitcode.Unavailable || !strings.Contains(err.Error(), "cannot be made noexec, nor checked") ||
		!strings.Contains(err.Error(), "the engine's process is not on this host") || !strings.Contains(hint, hostoutput.EnvAllowExecOutput) {
		t.Fatalf("run = %v (code %d, hint %q), want exit 5: the output directories cannot be made noexec", err, code, hint)
	}
	noCreate(t, r)

	r = newRig(t, orchestrate.WorkloadCheck)
	r.f.NotLocal = remote
	setEnv(r, EnvOutput, "bind")
	acceptExecOutput(r)
	res, err := r.run(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run = %v, want the verdict to fail\nstderr:\n%s", err, r.errb.String())
	}
	if e := res.Metadata.Engine; e.Local || e.Locality != remote {
		t.Errorf("engine recorded %+v, want not local, with the reason", e)
	}
	if len(r.f.Proven) != 0 || len(r.f.Dials) != 0 || len(r.f.Dropped) != 0 {
		t.Errorf("proven %q, dials %q, routes dropped %q: want none", r.f.Proven, r.f.Dials, r.f.Dropped)
	}
	failed := map[string]string{}
	for _, c := range res.Metadata.Verdict.Checks {
		if !c.OK {
			failed[c.Name] = c.Detail
		}
	}
	for _, role := range []string{orchestrate.RoleGateway, orchestrate.RoleSidecar, orchestrate.RoleAgent} {
		d, ok := failed[role+" hardening seen from outside"]
		if !ok || !strings.Contains(d, "the engine's process is not on this host") || !strings.Contains(d, "tcp://10.0.0.5:2375") {
			t.Errorf("%s's observed check: failed=%v %q, want a failure with the locality reason", role, ok, d)
		}
	}
	b, err := os.ReadFile(filepath.Join(res.RunDir, "gateway-start-results.json"))
	if err != nil || !strings.Contains(string(b), "the engine's report that the container runs") {
		t.Errorf("the gateway's start results do not say readiness was the engine's word: %s, %v", b, err)
	}
	if !strings.Contains(r.errb.String(), "warning: the engine's process is not on this host") {
		t.Errorf("no warning:\n%s", r.errb.String())
	}
}

// TestLifecycleOldEngineNotLocal: an engine older than 26 needs the host
// to remove each internal container's default route; one that is not
// local is refused before anything is created when the output is to be
// host directories (MCPSIDECAR_OUTPUT=bind); unset, a helper does it
// (TestLifecycleVolumeOutput).
func TestLifecycleOldEngineNotLocal(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	r.f.VersionString, r.o.AllowOldEngine, r.f.NotLocal = "20.10.24", true, remote
	setEnv(r, EnvOutput, "bind")
	res, err := r.run(context.Background())
	if code, _ := exitcode.Of(err); code != exitcode.Unavailable || !strings.Contains(err.Error(), "default route") ||
		!strings.Contains(err.Error(), "the engine's process is not on this host") {
		t.Fatalf("run = %v (code %d), want exit 5 refusing the route removal", err, code)
	}
	noCreate(t, r)
	if res.Metadata.Engine.Local {
		t.Error("recorded as local")
	}
}

// TestLifecycleOldEngineRoutes: on a local old engine, the default route
// of each held (internal-only) container is dropped through its proven
// process; a container whose process is not proven is not entered, and
// the run stops there.
func TestLifecycleOldEngineRoutes(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	r.f.VersionString, r.o.AllowOldEngine = "20.10.24", true
	pids := map[string]int{"id-egress-gateway": 1<<30 + 1, "id-mcp-sidecar": 1<<30 + 2, "id-sandbox-agent": 1<<30 + 3}
	r.f.PidOf = func(id string) int {
		for prefix, pid := range pids {
			if strings.HasPrefix(id, prefix) {
				return pid
			}
		}
		return 0
	}
	if _, err := r.run(context.Background()); err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v\nstderr:\n%s", err, r.errb.String())
	}
	want := []string{fmt.Sprint(pids["id-mcp-sidecar"]), fmt.Sprint(pids["id-sandbox-agent"])}
	if got := slices.Sorted(slices.Values(r.f.Dropped)); !slices.Equal(got, want) {
		t.Errorf("routes dropped for %q, want the sidecar's and the agent's %q", got, want)
	}

	r = newRig(t, orchestrate.WorkloadCheck)
	r.f.VersionString, r.o.AllowOldEngine = "20.10.24", true
	r.f.ProcessErr = func(id string) error {
		if strings.HasPrefix(id, "id-mcp-sidecar") {
			return fmt.Errorf("%w (process 4242 is not in the cgroup of container %s)", dockerx.ErrNotOnThisHost, id)
		}
		return nil
	}
	res, err := r.run(context.Background())
	if code, _ := exitcode.Of(err); code != exitcode.Unavailable || !strings.Contains(err.Error(), "removing the default route of sidecar: refused") {
		t.Fatalf("run = %v (code %d), want exit 5 refusing the sidecar's route removal", err, code)
	}
	if len(r.f.Dropped) != 0 {
		t.Errorf("routes dropped for %q, want none", r.f.Dropped)
	}
	if slices.ContainsFunc(r.f.CallList(), func(c string) bool { return strings.HasPrefix(c, "start id-sandbox-agent") }) {
		t.Error("the agent was started")
	}
	if res.Metadata.ExitCode != exitcode.Unavailable {
		t.Errorf("recorded exit %d", res.Metadata.ExitCode)
	}
	assertAllRemoved(t, r.f)
}

// TestUnobserved: a process that ended is not observed (its exit is judged
// elsewhere); one not proven is unproven, and its check fails with the
// reason, whatever that process would show; a container the engine
// reported no process for was not looked at, and its check fails too
// (found by TestEngineElsewhere: an agent that had ended before it was
// inspected passed as "not observed: no process id"). One seen to end
// before it could be read fails too: it was not looked at (every role is
// held, hardened, until it is read; observeHeld).
func TestUnobserved(t *testing.T) {
	for _, tt := range []struct {
		name     string
		pid      int
		err      error
		unproven bool
		ok       bool
	}{
		{"no process id", 0, nil, true, false},
		{"ended", 42, fmt.Errorf("process 42: %w", dockerx.ErrProcessGone), true, false},
		{"not on this host", 42, fmt.Errorf("%w (%s)", dockerx.ErrNotOnThisHost, remote), true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ob := unobserved(tt.pid, tt.err)
			if ob.Seen || (ob.Unproven != "") != tt.unproven {
				t.Errorf("observation %+v, want unproven=%v", ob, tt.unproven)
			}
			if c := verdict.ObservedCheck("agent", ob); c.OK != tt.ok || !strings.HasPrefix(c.Detail, "not observed") {
				t.Errorf("check %+v, want ok=%v", c, tt.ok)
			}
		})
	}
	c := verdict.ObservedCheck("agent", runs.Observation{Detail: "not observed: x", Unproven: "x"})
	if c.OK {
		t.Error("an unproven observation passed")
	}
}

// TestOutputMountUnproven: on a local engine, a container whose init is
// not proven to be on this host cannot have its mounts read: the run
// stops (exit 5) with the reason, rather than pass unchecked.
func TestOutputMountUnproven(t *testing.T) {
	fakes.use(t, &fakeOverrides{})
	r := newRig(t, orchestrate.WorkloadCheck)
	r.f.ProcessErr = func(id string) error {
		return fmt.Errorf("%w (process 4242 runs in this host's pid namespace, not a container's)", dockerx.ErrNotOnThisHost)
	}
	_, err := r.run(context.Background())
	if code, _ := exitcode.Of(err); code != exitcode.Unavailable || !strings.Contains(err.Error(), "gateway container's output directory could not be checked for noexec") ||
		!strings.Contains(err.Error(), "this host's pid namespace") {
		t.Fatalf("run = %v (code %d), want exit 5 with the proof's reason", err, code)
	}
	assertAllRemoved(t, r.f)
}

// TestLifecyclePodmanRefused: Podman's Docker-compatible API is refused
// before anything is created, with the reason and what to use instead.
func TestLifecyclePodmanRefused(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	r.f.Podman, r.f.VersionString = true, "5.4.2"
	_, err := r.run(context.Background())
	if code, hint := exitcode.Of(err); code != exitcode.Unavailable || !strings.Contains(err.Error(), "Podman 5.4.2") ||
		!strings.Contains(err.Error(), "aardvark-dns") || !strings.Contains(hint, "Docker Engine 26") {
		t.Fatalf("run = %v (code %d, hint %q), want exit 5 naming Podman, the reason and what to use", err, code, hint)
	}
	noCreate(t, r)
}
