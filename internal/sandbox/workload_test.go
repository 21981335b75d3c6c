package sandbox

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// runRig is a `run` rig with a model key on the host.
func runRig(t *testing.T) *rig {
	r := newRig(t, orchestrate.WorkloadAgent)
	r.o.Command = "run"
	get := r.o.Getenv
	r.o.Getenv = func(k string) string {
		if k == "OPENAI_API_KEY" {
			return "sk-test-workload"
		}
		return get(k)
	}
	return r
}

// agentSpec runs the rig and returns the agent-role container as created.
func agentSpec(t *testing.T, r *rig) (dockerx.ContainerSpec, error) {
	t.Helper()
	_, err := r.run(context.Background())
	for name, c := range r.f.Specs {
		if strings.HasPrefix(name, "sandbox-agent") {
			return c, err
		}
	}
	t.Fatalf("no agent container created (run: %v)", err)
	return dockerx.ContainerSpec{}, err
}

// TestOwnWorkloadPlan: a user's image runs in the agent's container with
// every Docker option the agent gets, the launcher mounted read-only as
// its entrypoint, the command after it, and the launcher's environment.
func TestOwnWorkloadPlan(t *testing.T) {
	base := runRig(t)
	ours, _ := agentSpec(t, base)

	r := runRig(t)
	r.f.Images["team/agent:1"] = true
	r.o.Own = &OwnWorkload{Image: "team/agent:1", Command: []string{"python3", "/app/agent.py"}, Pull: PullNever}
	got, _ := agentSpec(t, r)

	if got.Image != "team/agent:1" || !cmp.Equal(got.Entrypoint, []string{LauncherPath, "launch", "--"}) ||
		!cmp.Equal(got.Cmd, []string{"python3", "/app/agent.py"}) {
		t.Errorf("image %q entrypoint %q cmd %q", got.Image, got.Entrypoint, got.Cmd)
	}
	// The launcher is a private copy of the image's binary, never the
	// binary's own path (which could be swapped after it was checked),
	// and the copy is gone once the run is over.
	bin := r.o.Getenv(EnvImageBinary)
	i := slices.IndexFunc(got.Mounts, func(m dockerx.Mount) bool { return m.Target == LauncherPath })
	if i < 0 || !got.Mounts[i].ReadOnly || got.Mounts[i].Source == bin || !strings.Contains(got.Mounts[i].Source, "mcpsidecar-launcher-") {
		t.Errorf("the launcher is not a private copy mounted read-only: %+v", got.Mounts)
	} else if _, err := os.Stat(got.Mounts[i].Source); !os.IsNotExist(err) {
		t.Errorf("the launcher's copy %s is still there after the run: %v", got.Mounts[i].Source, err)
	}
	env := map[string]string{}
	for _, e := range got.Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{launcher.EnvSelf: LauncherPath, EnvWorkloadOutputDir: "/sandbox-output",
		envLaunchReportDir: "/sandbox-output", "MCP_SIDECAR_URL": "http://mcp-sidecar:8000/mcp", "HTTPS_PROXY": "http://egress-gateway:3128"} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	if env["MCPSIDECAR_HARDEN_POLICY"] == "" {
		t.Error("the launcher gets no policy")
	}
	// Set explicitly, so the image's own ENV cannot: no shell_access in
	// the default spec, no second stage, no HEALTHCHECK of the image.
	if v, ok := env[launcher.EnvShellAccess]; !ok || v != "0" {
		t.Errorf("%s = %q (set %v), want \"0\" set by the harness", launcher.EnvShellAccess, v, ok)
	}
	if v, ok := env[launcher.EnvStage]; !ok || v != "" {
		t.Errorf("%s = %q (set %v), want set empty", launcher.EnvStage, v, ok)
	}
	if !got.NoHealthcheck {
		t.Error("the image's HEALTHCHECK is not turned off")
	}
	// Every other Docker option is the agent's.
	type opts struct {
		ReadOnly            bool
		CapDrop, CapAdd     []string
		NoNewPrivs          bool
		Seccomp             string
		Tmpfs               map[string]string
		User                string
		Memory, Swap, CPUs  int64
		Pids                int64
		Ulimits             []dockerx.Ulimit
		Sysctls             map[string]string
		Masked              []string
		Init, CgroupPrivate bool
		DNS                 []string
	}
	pick := func(c dockerx.ContainerSpec) opts {
		return opts{c.ReadOnlyRootfs, c.CapDrop, c.CapAdd, c.NoNewPrivileges, c.Seccomp, c.Tmpfs, c.User, c.MemoryBytes, c.MemorySwapBytes,
			c.NanoCPUs, c.PidsLimit, c.Ulimits, c.Sysctls, c.MaskedPaths, c.Init, c.CgroupnsPrivate, c.DNS}
	}
	if diff := cmp.Diff(pick(ours), pick(got)); diff != "" {
		t.Errorf("the workload's Docker options differ from the agent's (-agent +workload):\n%s", diff)
	}
	if len(got.Networks) != 1 || len(ours.Networks) != 1 {
		t.Errorf("networks: agent %d, workload %d; want the internal network only", len(ours.Networks), len(got.Networks))
	}
}

// TestOwnWorkloadMissingImage: --pull never and no image: the run fails
// before any container exists, saying why.
func TestOwnWorkloadMissingImage(t *testing.T) {
	r := runRig(t)
	r.o.Own = &OwnWorkload{Image: "team/absent:1", Pull: PullNever}
	_, err := r.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "team/absent:1 is not in the engine, and --pull never forbids pulling it") {
		t.Fatalf("run = %v", err)
	}
	for name := range r.f.Specs {
		t.Errorf("container %s created for a missing image", name)
	}
}

// TestResolveOwn: flags over the spec's [workload].
func TestResolveOwn(t *testing.T) {
	if resolveOwn(&OwnWorkload{Pull: PullNever}, nil) != nil {
		t.Error("no image anywhere must run our agent")
	}
	sp := &spec.Spec{Workload: &spec.Workload{Image: "a:1", Command: []string{"python3", "/a.py"}}}
	for _, tt := range []struct {
		flags *OwnWorkload
		image string
		cmd   []string
	}{
		{nil, "a:1", []string{"python3", "/a.py"}},                                             // the spec's
		{&OwnWorkload{Image: "b:2"}, "b:2", nil},                                               // another image: its own command
		{&OwnWorkload{Image: "a:1"}, "a:1", []string{"python3", "/a.py"}},                      // the same image keeps the spec's command
		{&OwnWorkload{Command: []string{"/x"}}, "a:1", []string{"/x"}},                         // the flag's command on the spec's image
		{&OwnWorkload{Image: "b:2", Command: []string{"/y", "z"}}, "b:2", []string{"/y", "z"}}, // both from the flags
	} {
		got := resolveOwn(tt.flags, sp)
		if got == nil || got.Image != tt.image || !cmp.Equal(got.Command, tt.cmd) {
			t.Errorf("resolveOwn(%+v) = %+v, want %s %q", tt.flags, got, tt.image, tt.cmd)
		}
	}
}
