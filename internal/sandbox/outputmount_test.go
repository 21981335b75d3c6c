package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// The lifecycle's tests run without root and without real containers: the
// noexec mounts are recorded by fakeMounts instead of made (package noexec
// proves the real ones), and every container is seen noexec unless a test
// says otherwise.
var fakes = &fakeMounts{}

func init() {
	mountNoexec = fakes.mount
	seenNoexec = fakes.seen
}

type fakeMounts struct {
	mu       sync.Mutex
	mounted  []string
	released []string
	override *fakeOverrides // one test's answers at a time
}

type fakeOverrides struct {
	failWith error
	seenErr  error
}

func (f *fakeMounts) mount(dir string) (func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.override != nil && f.override.failWith != nil {
		return nil, f.override.failWith
	}
	f.mounted = append(f.mounted, dir)
	return func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.released = append(f.released, dir)
		return nil
	}, nil
}

func (f *fakeMounts) seen(dockerx.Process, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.override != nil {
		return f.override.seenErr
	}
	return nil
}

// use gives one test its own record and answers; the lifecycle tests are
// not parallel.
func (f *fakeMounts) use(t *testing.T, o *fakeOverrides) {
	f.mu.Lock()
	f.mounted, f.released, f.override = nil, nil, o
	f.mu.Unlock()
	t.Cleanup(func() {
		f.mu.Lock()
		f.override = nil
		f.mu.Unlock()
	})
}

func (f *fakeMounts) record() (mounted, released []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mounted), slices.Clone(f.released)
}

// TestOutputMountsEveryRole: each role's output directory (every writable
// mount of the plan) is made noexec before anything is created and
// released at the end, also when the run fails later.
func TestOutputMountsEveryRole(t *testing.T) {
	for _, fail := range []bool{false, true} {
		fakes.use(t, &fakeOverrides{})
		r := newRig(t, orchestrate.WorkloadCheck)
		if fail {
			r.f.FailOn = func(call string) error {
				if strings.HasPrefix(call, "create sandbox-agent") {
					return errors.New("boom")
				}
				return nil
			}
		}
		res, err := r.run(context.Background())
		if fail && (err == nil || !strings.Contains(err.Error(), "boom")) {
			t.Fatalf("run = %v, want the agent's creation to fail", err)
		}
		mounted, released := fakes.record()
		var want []string
		for _, st := range []string{orchestrate.RoleGateway, orchestrate.RoleSidecar, orchestrate.RoleAgent} {
			want = append(want, res.RunDir+"/"+st)
		}
		slices.Sort(mounted)
		slices.Sort(want)
		if !slices.Equal(mounted, want) {
			t.Errorf("fail=%v: mounted %q, want every role's output directory %q", fail, mounted, want)
		}
		slices.Sort(released)
		if !slices.Equal(released, mounted) {
			t.Errorf("fail=%v: released %q, want %q", fail, released, mounted)
		}
	}
}

// TestOutputMountRefused: a host that cannot mount stops the run before
// any container exists (exit 5, with the hint), unless the user accepts
// it; then it is a degradation and the launcher is told the one path.
func TestOutputMountRefused(t *testing.T) {
	eperm := &noexec.Error{Op: "bind-mounting", Dir: "/x", Err: unix.EPERM}
	fakes.use(t, &fakeOverrides{failWith: eperm})
	r := newRig(t, orchestrate.WorkloadCheck)
	res, err := r.run(context.Background())
	code, hint := exitcode.Of(err)
	if code != exitcode.Unavailable || !strings.Contains(hint, EnvAllowExecOutput) || !strings.Contains(err.Error(), "noexec") {
		t.Fatalf("run = %v (code %d, hint %q), want exit 5 naming noexec, with the opt-out in the hint", err, code, hint)
	}
	for _, c := range r.f.CallList() {
		if strings.HasPrefix(c, "create") {
			t.Errorf("%s: created although the output directories are not noexec", c)
		}
	}
	if res.Metadata.ExitCode != exitcode.Unavailable {
		t.Errorf("recorded exit %d", res.Metadata.ExitCode)
	}

	r = runRig(t)
	get := r.o.Getenv
	r.o.Getenv = func(k string) string {
		if k == EnvAllowExecOutput {
			return "1"
		}
		return get(k)
	}
	r.f.Images["team/agent:1"] = true
	r.o.Own = &OwnWorkload{Image: "team/agent:1", Command: []string{"python3", "/app/agent.py"}, Pull: PullNever}
	got, _ := agentSpec(t, r) // runs on (its verdict is the workload's: no audit from the fake sidecar)
	if !slices.ContainsFunc(got.Env, func(e dockerx.EnvVar) bool { return e.Name == launcher.EnvExecAccepted && e.Value == "/sandbox-output" }) {
		t.Errorf("the launcher is not told the accepted path: %+v", got.Env)
	}
	if !strings.Contains(r.errb.String(), "not noexec") {
		t.Errorf("no warning:\n%s", r.errb.String())
	}
}

// TestOutputMountUnseen: a container that does not see its output
// directory noexec (a daemon in another mount namespace) stops the run.
func TestOutputMountUnseen(t *testing.T) {
	fakes.use(t, &fakeOverrides{seenErr: &noexec.NotNoexecError{Path: "/sandbox-output"}})
	r := newRig(t, orchestrate.WorkloadCheck)
	_, err := r.run(context.Background())
	code, hint := exitcode.Of(err)
	if code != exitcode.Unavailable || !strings.Contains(err.Error(), "not noexec") || !strings.Contains(hint, "mount namespace") {
		t.Fatalf("run = %v (code %d, hint %q), want exit 5 saying the container does not see the mount", err, code, hint)
	}
	assertAllRemoved(t, r.f)
}

// TestOutputMountLauncherEnvAlwaysSet: without the opt-out the harness
// still sets the launcher's variable, empty, so an image's ENV cannot.
func TestOutputMountLauncherEnvAlwaysSet(t *testing.T) {
	fakes.use(t, &fakeOverrides{})
	r := runRig(t)
	r.f.Images["team/agent:1"] = true
	r.o.Own = &OwnWorkload{Image: "team/agent:1", Command: []string{"python3", "/app/agent.py"}, Pull: PullNever}
	got, _ := agentSpec(t, r)
	if !slices.ContainsFunc(got.Env, func(e dockerx.EnvVar) bool { return e.Name == launcher.EnvExecAccepted && e.Value == "" }) {
		t.Errorf("%s is not set empty: %+v", launcher.EnvExecAccepted, got.Env)
	}
}
