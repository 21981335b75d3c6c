package dockerbackend

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
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

// TestOutputMountLauncherEnvAlwaysSet: without the opt-out the harness
// still sets the launcher's variable, empty, so an image's ENV cannot.
func TestOutputMountLauncherEnvAlwaysSet(t *testing.T) {
	fakes.use(t, &fakeOverrides{})
	r := runRig(t)
	r.f.Images["team/agent:1"] = true
	r.o.Own = &sandbox.OwnWorkload{Image: "team/agent:1", Command: []string{"python3", "/app/agent.py"}, Pull: sandbox.PullNever}
	got, _ := agentSpec(t, r)
	if !slices.ContainsFunc(got.Env, func(e dockerx.EnvVar) bool { return e.Name == launcher.EnvExecAccepted && e.Value == "" }) {
		t.Errorf("%s is not set empty: %+v", launcher.EnvExecAccepted, got.Env)
	}
}
