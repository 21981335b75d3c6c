//go:build linux

package dockerbackend

import (
	"context"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hostoutput"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// TestOutputMountRefused: a host that cannot mount stops the run before
// any container exists (exit 5, with the hint), unless the user accepts
// it; then it is a degradation and the launcher is told the one path.
func TestOutputMountRefused(t *testing.T) {
	eperm := &noexec.Error{Op: "bind-mounting", Dir: "/x", Err: unix.EPERM}
	fakes.use(t, &fakeOverrides{failWith: eperm})
	r := newRig(t, orchestrate.WorkloadCheck)
	res, err := r.run(context.Background())
	code, hint := exitcode.Of(err)
	if code != exitcode.Unavailable || !strings.Contains(hint, hostoutput.EnvAllowExecOutput) || !strings.Contains(err.Error(), "noexec") {
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
		if k == hostoutput.EnvAllowExecOutput {
			return "1"
		}
		return get(k)
	}
	r.f.Images["team/agent:1"] = true
	r.o.Own = &sandbox.OwnWorkload{Image: "team/agent:1", Command: []string{"python3", "/app/agent.py"}, Pull: sandbox.PullNever}
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
