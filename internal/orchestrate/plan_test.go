package orchestrate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

func inputOld(t *testing.T, s *spec.Spec, w Workload) Input {
	in := input(t, s, w)
	in.DropRoutes = true
	return in
}

func input(t *testing.T, s *spec.Spec, w Workload) Input {
	t.Helper()
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatalf("resolving spec: %v", err)
	}
	return Input{
		Profile: p, RunID: "run-2026-01-02-03-04-05", RunDir: "/runs/run-2026-01-02-03-04-05",
		Image: "mcpsidecar:0123456789abcdef", Workload: w,
		Env: map[string][]dockerx.EnvVar{RoleAgent: {
			{Name: "OPENAI_API_KEY", Value: "sk-test-secret", Secret: true},
			{Name: EnvQuestion, Value: "why?"},
		}},
		Owner: Owner{PID: 4242, Host: "builder"}, Token: "a1b2c3", HoldToken: "hold-token-0123",
		ExtraLabels: map[string]string{"mcpsidecar.test": "1", LabelRun: "ignored"},
	}
}

func defaultSpec(t *testing.T) *spec.Spec {
	t.Helper()
	s, err := spec.Default()
	if err != nil {
		t.Fatalf("loading the default spec: %v", err)
	}
	return s
}

func specWith(caps ...string) *spec.Spec {
	s := &spec.Spec{Source: "<test>", SchemaVersion: 1, Capabilities: caps, AllowedDomains: []string{}, AllowedIPs: []string{}}
	if len(caps) > 0 && caps[0] == spec.CapNetwork {
		s.AllowedDomains = []string{".microsoft.com"}
	}
	return s
}

// goldenPlan is the plan as JSON with each inline seccomp profile replaced
// by its digest (the profile itself has its own golden in internal/spec).
func goldenPlan(t *testing.T, p Plan) []byte {
	t.Helper()
	for i := range p.Containers {
		if prof := p.Containers[i].Spec.Seccomp; prof != "" {
			sum := sha256.Sum256([]byte(prof))
			p.Containers[i].Spec.Seccomp = "<sha256:" + hex.EncodeToString(sum[:8]) + ">"
		}
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestPlanGolden(t *testing.T) {
	tests := []struct {
		name     string
		spec     *spec.Spec
		workload Workload
		old      bool
		engine   string
	}{
		{"default", defaultSpec(t), WorkloadAgent, false, ""},
		{"no-capabilities", specWith(), WorkloadAgent, false, ""},
		{"network", specWith(spec.CapNetwork), WorkloadAgent, false, ""},
		{"mcp_client", specWith(spec.CapNetwork, spec.CapMCPClient), WorkloadAgent, false, ""},
		{"openai_agents", specWith(spec.CapNetwork, spec.CapOpenAIAgents), WorkloadAgent, false, ""},
		{"shell_access", specWith(spec.CapShellAccess), WorkloadAgent, false, ""},
		{"doctor", specWith(spec.CapNetwork, spec.CapOpenAIAgents, spec.CapMCPClient), WorkloadCheck, false, ""},
		{"test-sandbox", specWith(spec.CapNetwork, spec.CapOpenAIAgents, spec.CapMCPClient), WorkloadProbe, false, ""},
		{"old-engine", defaultSpec(t), WorkloadAgent, true, ""},
		{"squid", defaultSpec(t), WorkloadAgent, false, EngineSquid},
		{"squid-test-sandbox-old-engine", specWith(spec.CapNetwork, spec.CapMCPClient), WorkloadProbe, true, EngineSquid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(t, tt.spec, tt.workload)
			if tt.old {
				in = inputOld(t, tt.spec, tt.workload)
			}
			if tt.engine != "" {
				in.GatewayEngine, in.SquidImage = tt.engine, "mcpsidecar-squid:local"
			}
			p, err := NewPlan(in)
			if err != nil {
				t.Fatal(err)
			}
			got := goldenPlan(t, p)
			testutil.Golden(t, filepath.Join("testdata", "plan-"+tt.name+".json"), got)
		})
	}
}

// TestPlanInvariants checks, for every case, the properties no capability
// may soften: the hardening every container keeps and the isolation of
// the internal-only ones.
func TestPlanInvariants(t *testing.T) {
	for _, caps := range [][]string{
		{spec.CapNetwork, spec.CapOpenAIAgents, spec.CapMCPClient}, {}, {spec.CapShellAccess},
	} {
		p, err := NewPlan(input(t, specWith(caps...), WorkloadAgent))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range p.Containers {
			t.Run(strings.Join(caps, "+")+"/"+st.Role, func(t *testing.T) {
				c := st.Spec
				if !c.ReadOnlyRootfs || c.User != spec.User || !c.Init || !c.CgroupnsPrivate {
					t.Errorf("rootfs ro=%v user=%q init=%v cgroupns private=%v", c.ReadOnlyRootfs, c.User, c.Init, c.CgroupnsPrivate)
				}
				if diff := cmp.Diff([]string{"ALL"}, c.CapDrop); diff != "" {
					t.Errorf("cap_drop (-want +got):\n%s", diff)
				}
				if len(c.CapAdd) != 0 {
					t.Errorf("cap_add = %v, want none", c.CapAdd)
				}
				if !c.NoNewPrivileges || !strings.HasPrefix(c.Seccomp, "{") {
					t.Errorf("no_new_privileges %v, seccomp %.80q; want set, our profile", c.NoNewPrivileges, c.Seccomp)
				}
				want := []dockerx.Mount{{Source: "/runs/run-2026-01-02-03-04-05/" + st.Role, Target: spec.OutputDir}}
				if diff := cmp.Diff(want, c.Mounts); diff != "" {
					t.Errorf("mounts (-want +got):\n%s", diff)
				}
				for _, k := range []string{LabelApp, LabelRun, LabelPID, LabelHost, LabelRole} {
					if c.Labels[k] == "" {
						t.Errorf("label %s missing", k)
					}
				}
				if c.Labels[LabelRun] != "run-2026-01-02-03-04-05" {
					t.Errorf("run label = %q: extra labels must not override it", c.Labels[LabelRun])
				}
				if c.MemoryBytes <= 0 || c.MemorySwapBytes != c.MemoryBytes || c.PidsLimit <= 0 || c.NanoCPUs <= 0 {
					t.Errorf("limits memory=%d swap=%d pids=%d cpus=%d", c.MemoryBytes, c.MemorySwapBytes, c.PidsLimit, c.NanoCPUs)
				}
				internalOnly := len(c.Networks) == 1 && c.Networks[0].Network == InternalNetwork(p.RunID)
				if internalOnly && (len(c.DNS) != 1 || c.DNS[0] != "0.0.0.0") {
					t.Errorf("internal-only container has dns %v, want [0.0.0.0]", c.DNS)
				}
				b, _ := json.Marshal(c)
				if strings.Contains(string(b), "sk-test-secret") {
					t.Errorf("secret value serialised: %s", b)
				}
			})
		}
	}
}

func TestPlanRejects(t *testing.T) {
	good := func() Input { return input(t, specWith(spec.CapNetwork, spec.CapMCPClient), WorkloadAgent) }
	tests := []struct {
		name    string
		mutate  func(*Input)
		wantErr string
	}{
		{"no profile", func(in *Input) { in.Profile = nil }, "no profile"},
		{"no run id", func(in *Input) { in.RunID = "" }, "empty run id"},
		{"relative run dir", func(in *Input) { in.RunDir = "runs/x" }, "not absolute"},
		{"no image", func(in *Input) { in.Image = "" }, "no image"},
		{"bad workload", func(in *Input) { in.Workload = "shell" }, `unknown workload "shell"`},
		{"missing container", func(in *Input) { delete(in.Profile.Containers, RoleSidecar) }, "no container for role sidecar"},
		{"agent not last", func(in *Input) { in.Profile.Roles = []string{RoleAgent, RoleSidecar} }, "do not end with the agent"},
		{"unknown gateway engine", func(in *Input) { in.GatewayEngine = "nginx" }, `unknown gateway engine "nginx"`},
		{"squid without image", func(in *Input) { in.GatewayEngine = EngineSquid }, "no Squid image"},
		{"squid without gateway", func(in *Input) {
			in.GatewayEngine, in.SquidImage, in.Profile.SquidConf = EngineSquid, "squid:x", ""
		}, "the spec has no gateway"},
		{"unknown network", func(in *Input) {
			c := in.Profile.Containers[RoleSidecar]
			c.Networks = []string{"host"}
			in.Profile.Containers[RoleSidecar] = c
		}, `unknown network "host"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := good()
			tt.mutate(&in)
			_, err := NewPlan(in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestSidecarCmd: doctor and test-sandbox start the sidecar offline, run
// does not; flags the spec already has are not repeated.
func TestSidecarCmd(t *testing.T) {
	audit := []string{"--audit-log", "/sandbox-output/" + AuditFile}
	tests := []struct {
		name     string
		workload Workload
		specCmd  []string
		want     []string
	}{
		{"run", WorkloadAgent, []string{"sidecar"}, append([]string{"sidecar"}, audit...)},
		{"doctor", WorkloadCheck, []string{"sidecar"}, append(append([]string{"sidecar"}, audit...), FlagNoUpstream)},
		{"test-sandbox", WorkloadProbe, []string{"sidecar"}, append(append([]string{"sidecar"}, audit...), FlagNoUpstream)},
		{"spec has both", WorkloadCheck, []string{"sidecar", FlagNoUpstream, "--audit-log", "/x"}, []string{"sidecar", FlagNoUpstream, "--audit-log", "/x"}},
		{"run keeps spec audit", WorkloadAgent, []string{"sidecar", "--audit-log", "/x"}, []string{"sidecar", "--audit-log", "/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Workload: tt.workload}
			got := in.cmd(RoleSidecar, spec.Container{Cmd: tt.specCmd})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("sidecar cmd (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHoldAll: with HoldAll every role that runs our role code is held
// at start (its outside observation comes before its work), a Squid
// gateway and a role whose command is replaced are not (neither waits
// for a release); the old engine's route is removed only from an
// internal-only container, and never from one that is not held.
func TestHoldAll(t *testing.T) {
	for _, tt := range []struct {
		name      string
		mutate    func(*Input)
		held      map[string]bool
		dropRoute map[string]bool
	}{
		{"off", func(*Input) {}, map[string]bool{}, map[string]bool{}},
		{"all", func(in *Input) { in.HoldAll = true },
			map[string]bool{RoleGateway: true, RoleSidecar: true, RoleAgent: true}, map[string]bool{}},
		{"old engine only", func(in *Input) { in.DropRoutes = true },
			map[string]bool{RoleSidecar: true, RoleAgent: true}, map[string]bool{RoleSidecar: true, RoleAgent: true}},
		{"all, old engine", func(in *Input) { in.HoldAll, in.DropRoutes = true, true },
			map[string]bool{RoleGateway: true, RoleSidecar: true, RoleAgent: true}, map[string]bool{RoleSidecar: true, RoleAgent: true}},
		{"squid", func(in *Input) {
			in.HoldAll, in.DropRoutes = true, true
			in.GatewayEngine, in.SquidImage = EngineSquid, "mcpsidecar-squid:local"
		}, map[string]bool{RoleSidecar: true, RoleAgent: true}, map[string]bool{RoleSidecar: true, RoleAgent: true}},
		{"replaced command", func(in *Input) {
			in.HoldAll, in.DropRoutes = true, true
			in.CmdOverride = map[string][]string{RoleAgent: {"x-sleep", "1s"}}
		}, map[string]bool{RoleGateway: true, RoleSidecar: true}, map[string]bool{RoleSidecar: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := input(t, defaultSpec(t), WorkloadAgent)
			tt.mutate(&in)
			p, err := NewPlan(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Containers) != 3 {
				t.Fatalf("want gateway, sidecar and agent, got %d steps", len(p.Containers))
			}
			for _, st := range p.Containers {
				held := slices.ContainsFunc(st.Spec.Env, func(e dockerx.EnvVar) bool { return e.Name == hold.Env }) &&
					slices.Contains(st.Spec.Env, dockerx.EnvVar{Name: hold.TokenEnv, Value: "hold-token-0123"})
				if st.Hold != tt.held[st.Role] || held != tt.held[st.Role] {
					t.Errorf("%s: step held %v, hold variable %v, want %v", st.Role, st.Hold, held, tt.held[st.Role])
				}
				if st.DropRoute != tt.dropRoute[st.Role] {
					t.Errorf("%s: DropRoute %v, want %v", st.Role, st.DropRoute, tt.dropRoute[st.Role])
				}
			}
		})
	}
	// No token, no hold: the plan refuses.
	in0 := input(t, defaultSpec(t), WorkloadAgent)
	in0.HoldAll, in0.HoldToken = true, ""
	if _, err := NewPlan(in0); err == nil || !strings.Contains(err.Error(), "no release token") {
		t.Errorf("a held plan without a token: got %v", err)
	}
	// A container with no network is held too.
	in := input(t, specWith(), WorkloadProbe)
	in.HoldAll = true
	p, err := NewPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Containers) != 1 || p.Containers[0].Spec.Networks[0].Network != "none" || !p.Containers[0].Hold || p.Containers[0].DropRoute {
		t.Fatalf("want one held container with no network and no route to drop, got %+v", p.Containers)
	}
}

// TestHoldVariablesAreTheHarness's: a spec variable named like the hold's
// (red team, session 37: MCPSIDECAR_HOLD_FILE set by a spec stood beside
// the harness's, and the sort chose which one a role read) is replaced by
// the harness's value, once each.
func TestHoldVariablesAreTheHarnesss(t *testing.T) {
	in := input(t, defaultSpec(t), WorkloadAgent)
	in.HoldAll = true
	c := in.Profile.Containers[RoleAgent]
	c.Env = map[string]string{hold.Env: "/early", hold.TokenEnv: "guess", "PAD000": "x"}
	in.Profile.Containers[RoleAgent] = c
	p, err := NewPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(p.Containers, func(st Step) bool { return st.Role == RoleAgent })
	if i < 0 {
		t.Fatal("no agent step")
	}
	st := p.Containers[i]
	var got []dockerx.EnvVar
	for _, e := range st.Spec.Env {
		if e.Name == hold.Env || e.Name == hold.TokenEnv {
			got = append(got, e)
		}
	}
	want := []dockerx.EnvVar{{Name: hold.Env, Value: hold.Path(spec.OutputDir)}, {Name: hold.TokenEnv, Value: "hold-token-0123"}}
	if !slices.Equal(got, want) {
		t.Errorf("hold variables %+v, want %+v", got, want)
	}
}

// TestPlanRefusesSquidRelay: agent_telemetry with the Squid engine is an
// invalid spec naming its line (Squid has no relay: the workload's
// telemetry would go nowhere while the ledger says it reaches the
// collector); the built-in gateway takes it.
func TestPlanRefusesSquidRelay(t *testing.T) {
	s, err := spec.Load("/specs/relay.toml", []byte("schema_version = 1\ncapabilities = [\"network\"]\n\nagent_telemetry = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	in := input(t, s, WorkloadAgent)
	if _, err := NewPlan(in); err != nil {
		t.Fatalf("the built-in gateway with agent_telemetry: %v", err)
	}
	in.GatewayEngine, in.SquidImage = EngineSquid, "mcpsidecar-squid:local"
	_, err = NewPlan(in)
	if err == nil || !strings.Contains(err.Error(), "/specs/relay.toml:4: agent_telemetry = true needs the built-in gateway") || !strings.Contains(err.Error(), "--gateway-engine ours") {
		t.Fatalf("got %v, want a refusal naming /specs/relay.toml:4", err)
	}
	if code, _ := exitcode.Of(err); code != exitcode.InvalidSpec {
		t.Errorf("exit code %d, want %d (invalid spec)", code, exitcode.InvalidSpec)
	}
}
