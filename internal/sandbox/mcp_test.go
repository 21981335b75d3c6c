package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// mcpSpec declares two MCP servers.
const mcpSpec = `schema_version = 1
capabilities = ["network", "mcp_client"]
allowed_domains = [".example.com", "mcp-b.test:8080"]

[[mcp_servers]]
name = "docs"
url = "https://docs.example.com/mcp"
tools = ["search"]

[[mcp_servers]]
name = "wiki"
url = "http://mcp-b.test:8080/mcp"
on_drift = "warn"
prefix_tools = true
`

// mcpSpecFile writes mcpSpec to a directory of its own, with a lock that
// pins docs only, and loads it: the lock's path is beside it.
func mcpSpecFile(t *testing.T) (*spec.Spec, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sandbox_spec.toml")
	sp, err := spec.Load(path, []byte(mcpSpec))
	if err != nil {
		t.Fatal(err)
	}
	lock := &mcppin.Lock{}
	lock.Put(mcppin.NewServer("docs", "https://docs.example.com/mcp", nil, nil))
	lockPath := mcppin.LockPath(path)
	if err := lock.Save(lockPath); err != nil {
		t.Fatal(err)
	}
	return sp, lockPath
}

func mcpInput(t *testing.T, sp *spec.Spec) *orchestrate.Input {
	t.Helper()
	p, err := spec.Resolve(sp)
	if err != nil {
		t.Fatal(err)
	}
	return &orchestrate.Input{Profile: p, GatewayEngine: orchestrate.EngineOurs}
}

func envOf(env []dockerx.EnvVar, name string) (dockerx.EnvVar, bool) {
	i := slices.IndexFunc(env, func(e dockerx.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return dockerx.EnvVar{}, false
	}
	return env[i], true
}

// TestMCPPlan: the lock's pins and the run's credential placeholder reach
// the sidecar; the servers the lock lacks are remembered for the run's
// end; the Squid engine is refused as an invalid spec (exit 3); a spec
// without declared servers is left alone.
func TestMCPPlan(t *testing.T) {
	sp, lockPath := mcpSpecFile(t)
	in := mcpInput(t, sp)
	in.Env = map[string][]dockerx.EnvVar{orchestrate.RoleGateway: {{Name: spec.EnvCredentialPlaceholder, Value: "mcpsidecar-placeholder-00", Secret: true}}}
	m, err := mcpPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if m.lock != lockPath || !slices.Equal(m.missing, []string{"wiki"}) {
		t.Errorf("stage %+v, want lock %s and wiki missing", m, lockPath)
	}
	env := in.Env[orchestrate.RoleSidecar]
	pins, ok := envOf(env, spec.EnvMCPPins)
	if !ok || !strings.Contains(pins.Value, `"docs"`) || strings.Contains(pins.Value, `"wiki"`) {
		t.Errorf("sidecar pins %+v, want docs only", pins)
	}
	ph, ok := envOf(env, spec.EnvCredentialPlaceholder)
	if !ok || ph.Value != "mcpsidecar-placeholder-00" || !ph.Secret {
		t.Errorf("sidecar placeholder %+v, want the gateway's, secret", ph)
	}

	squid := mcpInput(t, sp)
	squid.GatewayEngine = orchestrate.EngineSquid
	if _, err := mcpPlan(squid); !errors.Is(err, errSquidMCP) {
		t.Errorf("Squid: %v, want the refusal", err)
	} else if code, _ := exitcode.Of(err); code != exitcode.InvalidSpec {
		t.Errorf("Squid refused with exit %d, want %d", code, exitcode.InvalidSpec)
	}

	def, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	none := mcpInput(t, def)
	if m, err := mcpPlan(none); m != nil || err != nil || none.Env != nil {
		t.Errorf("without declared servers: %+v, %v, env %v; want nothing", m, err, none.Env)
	}
}

// TestMCPPinFirstRun: after a run, the observed definitions of the
// servers the lock lacked are added (what it pinned is never changed),
// and said; nothing happens when the sidecar observed none; a broken
// record of them is a warning.
func TestMCPPinFirstRun(t *testing.T) {
	sp, lockPath := mcpSpecFile(t)
	m, err := mcpPlan(mcpInput(t, sp))
	if err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	var out bytes.Buffer
	m.pinFirstRun(runDir, &out) // the sidecar connected to none
	if out.Len() != 0 {
		t.Errorf("without observed definitions it said %q", out.String())
	}
	observed := &mcppin.Lock{}
	observed.Put(mcppin.NewServer("wiki", "http://mcp-b.test:8080/mcp", nil, nil))
	observed.Put(mcppin.NewServer("docs", "https://changed.example/mcp", nil, nil))
	if err := os.MkdirAll(filepath.Join(runDir, orchestrate.RoleSidecar), 0o755); err != nil {
		t.Fatal(err)
	}
	observedPath := filepath.Join(runDir, orchestrate.RoleSidecar, spec.FileMCPPins)
	if err := observed.Save(observedPath); err != nil {
		t.Fatal(err)
	}
	m.pinFirstRun(runDir, &out)
	got, err := mcppin.Load(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Server("docs"); d.URL != "https://docs.example.com/mcp" {
		t.Errorf("the first run changed a pinned server: %+v", d)
	}
	want := "pinned the tool definitions of wiki in " + lockPath + " (first run;"
	if _, ok := got.Server("wiki"); !ok || !strings.Contains(out.String(), want) {
		t.Errorf("wiki not pinned after its first run; said %q", out.String())
	}

	out.Reset()
	if err := os.WriteFile(observedPath, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.pinFirstRun(runDir, &out)
	if !strings.HasPrefix(out.String(), "warning: recording MCP tool definitions: ") {
		t.Errorf("a broken record said %q, want a warning", out.String())
	}
	var none *mcpPins
	none.pinFirstRun(runDir, &out) // no declared servers: nothing, no panic
}

// TestLifecycleMCPStage: the stage runs inside the lifecycle: the
// sidecar's container gets the pins, the definitions it observed of an
// unpinned server are in the lock after the run, and the Squid engine
// fails the run-dir phase with exit 3, leaving nothing behind.
func TestLifecycleMCPStage(t *testing.T) {
	t.Run("pins", func(t *testing.T) {
		r := newRig(t, orchestrate.WorkloadCheck)
		sp, lockPath := mcpSpecFile(t)
		r.o.Spec = SpecInput{Name: sp.Source, Spec: sp}
		var sidecar dockerx.ContainerSpec
		onCreate, onStart := r.f.OnCreate, r.f.OnStart
		r.f.OnCreate = func(c dockerx.ContainerSpec) {
			onCreate(c)
			if c.Labels[orchestrate.LabelRole] == orchestrate.RoleSidecar {
				sidecar = c
			}
		}
		r.f.OnStart = func(id string) {
			onStart(id)
			if id != "id-"+sidecar.Name {
				return
			}
			observed := &mcppin.Lock{}
			observed.Put(mcppin.NewServer("wiki", "http://mcp-b.test:8080/mcp", nil, nil))
			if err := observed.Save(filepath.Join(sidecar.Mounts[0].Source, spec.FileMCPPins)); err != nil {
				t.Errorf("the sidecar's observed pins: %v", err)
			}
		}
		res, err := r.run(context.Background())
		if res.RunDir == "" {
			t.Fatalf("run: %v\nstderr:\n%s", err, r.errb.String())
		}
		if pins, ok := envOf(sidecar.Env, spec.EnvMCPPins); !ok || !strings.Contains(pins.Value, `"docs"`) {
			t.Errorf("the sidecar's pins %+v, want the lock's", pins)
		}
		lock, err := mcppin.Load(lockPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := lock.Server("wiki"); !ok || !strings.Contains(r.errb.String(), "pinned the tool definitions of wiki") {
			t.Errorf("wiki not pinned after the run; stderr:\n%s", r.errb.String())
		}
		assertAllRemoved(t, r.f)
	})
	t.Run("squid", func(t *testing.T) {
		r := newRig(t, orchestrate.WorkloadCheck)
		sp, _ := mcpSpecFile(t)
		r.o.Spec = SpecInput{Name: sp.Source, Spec: sp}
		r.o.GatewayEngine, r.o.SquidImage = orchestrate.EngineSquid, "mcpsidecar-squid:test"
		r.f.Images[r.o.SquidImage] = true
		res, err := r.run(context.Background())
		if !errors.Is(err, errSquidMCP) {
			t.Fatalf("run: %v, want the Squid refusal", err)
		}
		if code, _ := exitcode.Of(err); code != exitcode.InvalidSpec {
			t.Errorf("exit %d, want %d", code, exitcode.InvalidSpec)
		}
		if n := len(res.Metadata.Phases); n == 0 || res.Metadata.Phases[n-1].Name != "run-dir" || res.Metadata.Phases[n-1].OK {
			t.Errorf("phases %+v, want run-dir failed last", res.Metadata.Phases)
		}
		assertAllRemoved(t, r.f)
	})
}
