package dockerbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx/dockerxtest"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// The backend's tests run sandbox.Run end to end on the fake engine
// (internal/dockerx/dockerxtest): nothing is created, no packet leaves
// the host (the readiness checks reach a test server on loopback), and
// each test sees every engine call in order.

// rig is one lifecycle on the fake engine.
type rig struct {
	t       *testing.T
	f       *dockerxtest.Engine
	o       sandbox.Options
	out     bytes.Buffer
	errb    syncBuffer
	profile *spec.Profile
	// agentExit is the code the workload exits with once started; -1
	// leaves it running.
	agentExit int
	// onAgent is called once the workload started.
	onAgent func()
	// volumes holds, by name, the directory standing in for each output
	// volume (volumeDir).
	volumes string
}

// volumeDir is the directory standing in for output volume name.
func (r *rig) volumeDir(name string) string {
	if r.volumes == "" {
		r.volumes = r.t.TempDir()
	}
	d := filepath.Join(r.volumes, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		r.t.Fatal(err)
	}
	return d
}

// syncBuffer is a bytes.Buffer for writers on several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// checkTable is what `agent --check` prints when every check passes.
const checkTable = "CHECK          RESULT  DETAIL\nsidecar tools  ok      4 tools\nno route out   ok      no default route\n"

func newRig(t *testing.T, workload orchestrate.Workload) *rig {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpsidecar")
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(bin, dockerxtest.StaticELF("lifecycle test"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("ca"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Output to host directories unless a test says otherwise: the
	// default depends on this process's euid.
	env := map[string]string{sandbox.EnvImageBinary: bin, sandbox.EnvCABundle: ca, EnvOutput: "bind"}
	sp, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := spec.Resolve(sp)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, f: dockerxtest.New(), profile: prof}
	r.f.Pid = 1 << 30 // the fake's proven process answers for it: nothing of this host is read
	r.o = sandbox.Options{
		Command: "doctor", Workload: workload,
		Spec:    sandbox.SpecInput{Name: "built-in default", Spec: sp},
		RunsDir: filepath.Join(dir, "runs"), Timeout: 10 * time.Second, ReadyTimeout: 5 * time.Second,
		GatewayEngine: orchestrate.EngineOurs, SubnetPool: netip.MustParsePrefix(orchestrate.DefaultSubnetPool),
		Getenv: func(k string) string { return env[k] }, Backend: New(),
	}
	// Each started role writes the harden report its policy asks for, as
	// the real roles do; the workload prints the check table and exits.
	names := map[string]dockerx.ContainerSpec{}
	r.f.OnCreate = func(c dockerx.ContainerSpec) {
		names["id-"+c.Name] = c
		if c.Labels[orchestrate.LabelRole] == orchestrate.RoleAgent {
			r.f.Output["id-"+c.Name] = checkTable
		}
	}
	r.f.OnStart = func(id string) {
		c := names[id]
		role := c.Labels[orchestrate.LabelRole]
		if _, ok := prof.Containers[role]; !ok {
			return // a helper or the output holder: not a role
		}
		out := c.Mounts[0].Source
		if !filepath.IsAbs(out) { // an output volume: its content in a directory of the test's
			out = r.volumeDir(out)
		}
		pol := prof.Containers[role].Harden
		if role == orchestrate.RoleAgent && workload == orchestrate.WorkloadProbe {
			pol = prof.Probe().Harden
		}
		rep := harden.Report{Schema: harden.ReportSchema, Role: role, Layers: []harden.LayerStatus{}, Degradations: []string{}}
		for _, l := range pol.RequiredLayers() {
			rep.Layers = append(rep.Layers, harden.LayerStatus{Name: l, Required: true, Enforced: true})
		}
		if err := harden.WriteReport(out, rep); err != nil {
			t.Errorf("writing %s's report: %v", role, err)
		}
		if role == orchestrate.RoleAgent {
			if r.agentExit >= 0 {
				r.f.Exit(id, r.agentExit)
			}
			if r.onAgent != nil {
				r.onAgent()
			}
		}
	}
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/healthz" {
			http.NotFound(w, req)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(health.Close)
	healthAddr := strings.TrimPrefix(health.URL, "http://")
	old, oldBridge := hostPrefixes, bridgeAddrs
	hostPrefixes = func() ([]netip.Prefix, error) { return nil, nil }
	// Recorded with the address asked for; connected to the test's
	// server, the container's loopback standing in.
	r.f.Dial = func(ctx context.Context, _ int, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", healthAddr)
	}
	bridgeAddrs = func(string) ([]string, error) { return []string{}, nil }
	t.Cleanup(func() { hostPrefixes, bridgeAddrs = old, oldBridge })
	return r
}

func (r *rig) run(ctx context.Context) (sandbox.Result, error) {
	return sandbox.Run(ctx, r.f, r.o, sandbox.Output{Out: &r.out, Err: &r.errb})
}

func phaseNames(ps []runs.Phase) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// created and removed are the containers and networks the fake was asked
// to create and to remove, as ids.
func createdRemoved(calls, failed []string) (created, removed []string) {
	for _, c := range calls {
		if slices.Contains(failed, c) {
			continue
		}
		switch verb, arg, _ := strings.Cut(c, " "); verb {
		case "create":
			created = append(created, "id-"+arg)
		case "create-network":
			created = append(created, "net-"+arg)
		case "remove", "remove-network":
			removed = append(removed, arg)
		}
	}
	return created, removed
}

// assertAllRemoved: everything created was removed once, every container
// before any network (teardown removes the containers together, then the
// networks together, so the order within each group is not fixed).
func assertAllRemoved(t *testing.T, f *dockerxtest.Engine) {
	t.Helper()
	created, removed := createdRemoved(f.CallList(), f.FailedList())
	group := func(ids []string) (containers, networks []string) {
		for _, id := range ids {
			if strings.HasPrefix(id, "id-") {
				containers = append(containers, id)
			} else if strings.HasPrefix(id, "net-") {
				networks = append(networks, id)
			}
		}
		slices.Sort(containers)
		slices.Sort(networks)
		return containers, networks
	}
	wc, wn := group(created)
	want := append(wc, wn...)
	gc, gn := group(removed)
	got := append(gc, gn...)
	if i := slices.IndexFunc(removed, func(id string) bool { return strings.HasPrefix(id, "net-") }); i >= 0 &&
		slices.ContainsFunc(removed[i:], func(id string) bool { return strings.HasPrefix(id, "id-") }) {
		t.Errorf("a network was removed before a container: %q", removed)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("removed (-want +got):\n%s\ncalls: %q", diff, f.CallList())
	}
}

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

// TestLifecyclePhaseOrder: the phases come in the documented order, the
// plan's from the plan; the engine sees the networks first, each
// container created before it is started (the others are created, and
// the held sidecar started, beside the gateway's start: that overlap is
// a race here), the workload attached and started last, then removal.
func TestLifecyclePhaseOrder(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	res, err := r.run(context.Background())
	if err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v\nstderr:\n%s", err, r.errb.String())
	}
	want := []string{"spec", "preflight", "image", "run-dir", "networks", "gateway", "sidecar", "agent", "wait", "collect", "teardown"}
	if diff := cmp.Diff(want, phaseNames(res.Metadata.Phases)); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	order := engineOrder(r.f.CallList())
	at := func(e string) int {
		i := slices.Index(order, e)
		if i < 0 {
			t.Fatalf("%q not seen: %q", e, order)
		}
		return i
	}
	before := [][2]string{
		{"create-network mcpsidecar", "create egress-gateway"},
		{"create egress-gateway", "start id-egress-gateway"}, {"create mcp-sidecar", "start id-mcp-sidecar"},
		{"create sandbox-agent", "attach id-sandbox-agent"}, {"attach id-sandbox-agent", "start id-sandbox-agent"},
		{"start id-egress-gateway", "start id-sandbox-agent"}, {"start id-mcp-sidecar", "start id-sandbox-agent"},
	}
	for _, b := range before {
		if at(b[0]) > at(b[1]) {
			t.Errorf("%q came after %q: %q", b[0], b[1], order)
		}
	}
	if order[len(order)-1] != "start id-sandbox-agent" || strings.Count(strings.Join(order, "\n"), "create-network") != 2 ||
		!strings.HasPrefix(order[0], "create-network") || !strings.HasPrefix(order[1], "create-network") {
		t.Errorf("want the two networks first and the workload's start last: %q", order)
	}
	assertAllRemoved(t, r.f)
	// The fake roles write their harden reports and the workload its
	// check table; checks of what else a real role writes may fail here.
	for _, c := range res.Metadata.Verdict.Checks {
		if strings.Contains(c.Name, "hardening") || c.Name == "agent --check exited 0" || c.Name == "sidecar tools" {
			if !c.OK {
				t.Errorf("check %q failed: %s", c.Name, c.Detail)
			}
		}
	}
	if got := r.out.String(); !strings.Contains(got, "sidecar tools") {
		t.Errorf("the workload's stdout did not reach sandbox.Output.Out: %q", got)
	}
	for _, name := range []string{runs.MetadataFile, "stdout.txt", "gateway-start-results.json", "mcp-sidecar-start-results.json", "gateway-logs.json", "mcp-sidecar-logs.json"} {
		if _, err := os.Stat(filepath.Join(res.RunDir, name)); err != nil {
			t.Errorf("artifact: %v", err)
		}
	}
}

// engineOrder is the creations, starts and attaches among calls, in
// order, each container named by its role's prefix.
func engineOrder(calls []string) []string {
	var order []string
	for _, c := range calls {
		verb, arg, _ := strings.Cut(c, " ")
		switch verb {
		case "create-network":
			order = append(order, "create-network mcpsidecar") // network names carry the run id
		case "create", "start", "attach":
			order = append(order, verb+" "+strings.SplitN(arg, "-run-", 2)[0])
		}
	}
	return order
}

// TestLifecycleOldEngineOrder: on an engine that needs holds, the sidecar's
// container is started ahead (while the gateway becomes ready), and the
// agent is started only once the gateway and the sidecar are both ready
// (each answered its readiness check).
func TestLifecycleOldEngineOrder(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	r.f.VersionString, r.o.AllowOldEngine = "20.10.24", true
	pids := map[string]int{"id-egress-gateway": 1<<30 + 1, "id-mcp-sidecar": 1<<30 + 2, "id-sandbox-agent": 1<<30 + 3}
	role := map[int]string{}
	r.f.PidOf = func(id string) int {
		for prefix, pid := range pids {
			if strings.HasPrefix(id, prefix) {
				return pid
			}
		}
		return 0
	}
	for prefix, pid := range pids {
		role[pid] = prefix
	}
	res, err := r.run(context.Background())
	if err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v\nstderr:\n%s", err, r.errb.String())
	}
	// The fake records each readiness connection as "dial PID HOST"; the
	// test's health server answers 200 at once, so a role's first dial is
	// its readiness answered.
	var ev []string
	for _, c := range r.f.CallList() {
		verb, arg, _ := strings.Cut(c, " ")
		switch verb {
		case "start":
			ev = append(ev, "start "+strings.SplitN(arg, "-run-", 2)[0])
		case "dial":
			pid, _, _ := strings.Cut(arg, " ")
			for p, name := range role {
				if pid == strconv.Itoa(p) && !slices.Contains(ev, "ready "+name) {
					ev = append(ev, "ready "+name)
				}
			}
		}
	}
	at := func(e string) int {
		i := slices.Index(ev, e)
		if i < 0 {
			t.Fatalf("%q not seen: %q", e, ev)
		}
		return i
	}
	// (Whether the sidecar's start overlapped the gateway's readiness is
	// a race here, where both take no time: orchestrate's
	// TestApplyOrderHeld holds the gateway back to see it. Its start
	// results say it was started ahead.)
	_ = at("start id-mcp-sidecar")
	if at("start id-sandbox-agent") < at("ready id-egress-gateway") || at("start id-sandbox-agent") < at("ready id-mcp-sidecar") {
		t.Errorf("the agent was started before the gateway and the sidecar were ready: %q", ev)
	}
	// Released (the hold file written) only by then: the files are gone,
	// as the role removes them, but the order of the phases says it.
	want := []string{"spec", "preflight", "image", "run-dir", "networks", "gateway", "sidecar", "agent", "wait", "collect", "teardown"}
	if diff := cmp.Diff(want, phaseNames(res.Metadata.Phases)); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	b, err := os.ReadFile(filepath.Join(res.RunDir, "mcp-sidecar-start-results.json"))
	if err != nil || !strings.Contains(string(b), "create and start (held) while the services before it became ready") {
		t.Errorf("the sidecar's start results do not say it was started ahead: %s, %v", b, err)
	}
	assertAllRemoved(t, r.f)
}

// TestLifecycleHooks: the optional hooks are called where doc.go says.
func TestLifecycleHooks(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	var seen []string
	var mu sync.Mutex
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	r.o.PlanInput = func(in *orchestrate.Input) error {
		in.Env[orchestrate.RoleAgent] = append(in.Env[orchestrate.RoleAgent], dockerx.EnvVar{Name: "HOOK_TEST", Value: "1"})
		note("plan-input")
		return nil
	}
	r.o.Plan = func(p *orchestrate.Plan) error {
		note("plan " + strings.Join(p.Phases(), ","))
		return nil
	}
	watched := make(chan string, 1)
	r.o.Watch = func(ctx context.Context, runDir string, _ sandbox.Redactor) {
		note("watch")
		<-ctx.Done()
		watched <- runDir
	}
	r.o.OnPhase = func(p runs.Phase) { note("phase " + p.Name) }
	r.o.Checks = func(runDir string, m *runs.Metadata) []runs.Check {
		note("checks")
		return []runs.Check{{Name: "hook check", OK: false, Detail: "from the hook"}}
	}
	res, err := r.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "hook check: from the hook") {
		t.Fatalf("run: %v, want the hook's failed check", err)
	}
	if got := <-watched; got != res.RunDir {
		t.Errorf("Watch got %q, want %q", got, res.RunDir)
	}
	env := ""
	for name, c := range r.f.Specs {
		if strings.HasPrefix(name, "sandbox-agent") {
			for _, e := range c.Env {
				if e.Name == "HOOK_TEST" {
					env = e.Value
				}
			}
		}
	}
	if env != "1" {
		t.Errorf("PlanInput's variable did not reach the agent's container")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"plan-input", "plan networks,gateway,sidecar,agent,wait", "watch", "phase wait", "checks", "phase teardown"} {
		if !slices.Contains(seen, want) {
			t.Errorf("hook %q not called; seen %q", want, seen)
		}
	}
	if i, j := slices.Index(seen, "plan-input"), slices.Index(seen, "phase run-dir"); i > j {
		t.Errorf("PlanInput after the run-dir phase ended: %q", seen)
	}
}

// TestLifecycleTeardownAfterFailure: whichever phase fails, the run stops
// there, its error says so, everything created so far is removed, and a
// run directory made before the failure holds run-metadata.json with the
// failed phase.
func TestLifecycleTeardownAfterFailure(t *testing.T) {
	boom := errors.New("boom")
	failOn := func(prefix string) func(*rig) {
		return func(r *rig) {
			r.f.FailOn = func(call string) error {
				if strings.HasPrefix(call, prefix) {
					return boom
				}
				return nil
			}
		}
	}
	// runDir: the run directory exists (and records the failure);
	// session: something may have been created, so teardown runs.
	tests := []struct {
		phase   string
		setup   func(*rig)
		runDir  bool
		session bool
		wantErr string
	}{
		{"spec", func(r *rig) {
			r.o.Spec = sandbox.SpecInput{Err: boom}
		}, false, false, "boom"},
		{"preflight", func(r *rig) { r.f.VersionErr = boom }, false, false, "boom"},
		{"image", func(r *rig) {
			// The classic builder fails, and so does the import it falls back to.
			r.f.FailOn = func(call string) error {
				if strings.HasPrefix(call, "build ") || strings.HasPrefix(call, "import ") {
					return boom
				}
				return nil
			}
		}, false, false, "boom"},
		{"run-dir", func(r *rig) { r.o.Plan = func(*orchestrate.Plan) error { return boom } }, true, false, "boom"},
		{"networks", func(r *rig) {
			n := 0
			r.f.FailOn = func(call string) error {
				if strings.HasPrefix(call, "create-network ") {
					if n++; n == 2 {
						return boom
					}
				}
				return nil
			}
		}, true, true, "boom"},
		{"gateway", failOn("start id-egress-gateway"), true, true, "starting the gateway: boom"},
		{"sidecar", failOn("create mcp-sidecar"), true, true, "starting the sidecar: boom"},
		{"agent", failOn("attach id-sandbox-agent"), true, true, "boom"},
		{"wait", func(r *rig) { r.agentExit, r.o.Timeout = -1, 50*time.Millisecond }, true, true, "still running after the 50ms timeout; killed"},
	}
	for _, tt := range tests {
		t.Run(tt.phase, func(t *testing.T) {
			r := newRig(t, orchestrate.WorkloadCheck)
			tt.setup(r)
			res, err := r.run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("run: %v, want %q", err, tt.wantErr)
			}
			assertAllRemoved(t, r.f)
			if got := res.RunDir != ""; got != tt.runDir {
				t.Fatalf("run dir %q, want one: %v", res.RunDir, tt.runDir)
			}
			// The progress lines say which phase failed, with or without
			// a run directory to record it.
			var failed []string
			for _, line := range strings.Split(r.errb.String(), "\n") {
				if name, rest, ok := strings.Cut(strings.TrimPrefix(line, "["), "]"); ok && strings.Contains(rest, "FAILED") {
					failed = append(failed, strings.TrimSpace(name))
				}
			}
			if len(failed) == 0 || failed[0] != tt.phase {
				t.Errorf("failed phases %q, want %q first\n%s", failed, tt.phase, r.errb.String())
			}
			if !tt.runDir {
				return
			}
			ps := res.Metadata.Phases
			if p := ps[slices.IndexFunc(ps, func(p runs.Phase) bool { return !p.OK })]; p.Name != tt.phase {
				t.Errorf("metadata: first failed phase %q, want %q", p.Name, tt.phase)
			}
			if last := phaseNames(ps)[len(ps)-1]; tt.session != (last == "teardown") {
				t.Errorf("last phase %q; teardown expected: %v", last, tt.session)
			}
			b, err := os.ReadFile(filepath.Join(res.RunDir, runs.MetadataFile))
			if err != nil {
				t.Fatal(err)
			}
			var m runs.Metadata
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m.ExitCode == exitcode.OK || m.Verdict.OK {
				t.Errorf("metadata of a failed run: exit %d, verdict ok %v", m.ExitCode, m.Verdict.OK)
			}
		})
	}
}

// TestLifecycleTornRunIsCollected: a gateway that fails to start leaves
// its start results (not ok, with the error), its logs and its container
// in the record, and the workload never starts. The containers created
// up front are in the record too, never started, and all are removed.
func TestLifecycleTornRunIsCollected(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	r.f.FailOn = func(call string) error {
		if strings.HasPrefix(call, "start id-egress-gateway") {
			return errors.New("no such image layer")
		}
		return nil
	}
	res, err := r.run(context.Background())
	if err == nil {
		t.Fatal("run succeeded")
	}
	b, err := os.ReadFile(filepath.Join(res.RunDir, "gateway-start-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sr []sandbox.StartResult
	if err := json.Unmarshal(b, &sr); err != nil {
		t.Fatal(err)
	}
	if len(sr) != 1 || sr[0].OK || !strings.Contains(sr[0].Error, "no such image layer") || !strings.HasPrefix(sr[0].ID, "id-egress-gateway") {
		t.Errorf("start results %+v", sr)
	}
	if _, err := os.Stat(filepath.Join(res.RunDir, "gateway-logs.json")); err != nil {
		t.Errorf("gateway logs not collected: %v", err)
	}
	if _, err := os.Stat(filepath.Join(res.RunDir, "stdout.txt")); err == nil {
		t.Errorf("stdout.txt written for a workload that never ran")
	}
	var roles []string
	for _, c := range res.Metadata.Containers {
		roles = append(roles, c.Role)
	}
	if diff := cmp.Diff([]string{orchestrate.RoleGateway, orchestrate.RoleSidecar, orchestrate.RoleAgent}, roles); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	for _, c := range res.Metadata.Containers {
		if c.ExitCode != nil && c.Role == orchestrate.RoleAgent {
			t.Errorf("%s has an exit code (%d) but never started", c.Role, *c.ExitCode)
		}
	}
	assertAllRemoved(t, r.f)
	if c := res.Metadata.Verdict.Checks; len(c) == 0 || c[0].Name != "workload ran" || c[0].OK {
		t.Errorf("verdict checks %+v", c)
	}
	// The sidecar may have been started ahead, held (its start overlaps
	// the gateway's); it was never released, and the workload never
	// started.
	for _, c := range r.f.CallList() {
		if strings.HasPrefix(c, "start id-sandbox-agent") || strings.HasPrefix(c, "attach ") {
			t.Errorf("%q after the gateway failed", c)
		}
	}
	if _, err := os.Lstat(filepath.Join(res.RunDir, orchestrate.RoleSidecar, hold.File)); err == nil {
		t.Error("the sidecar was released after the gateway failed")
	}
}

// TestLifecycleCancel: a signal (ctx cancelled) while the workload runs
// kills it, collects what it printed, tears everything down and records
// exit 130.
func TestLifecycleCancel(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.agentExit = -1
	r.onAgent = func() {
		go func() {
			time.Sleep(50 * time.Millisecond) // while the lifecycle waits for the workload
			cancel()
		}()
	}
	res, err := r.run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want context.Canceled", err)
	}
	if res.Metadata.ExitCode != exitcode.Interrupted {
		t.Errorf("exit code %d, want %d", res.Metadata.ExitCode, exitcode.Interrupted)
	}
	killed := false
	for _, c := range r.f.CallList() {
		killed = killed || strings.HasPrefix(c, "kill id-sandbox-agent") && strings.HasSuffix(c, " KILL")
	}
	if !killed {
		t.Errorf("the workload was not killed: %q", r.f.CallList())
	}
	assertAllRemoved(t, r.f)
	b, err := os.ReadFile(filepath.Join(res.RunDir, "stdout.txt"))
	if err != nil || !bytes.Contains(b, []byte("sidecar tools")) {
		t.Errorf("stdout.txt %q, %v", b, err)
	}
	if got := phaseNames(res.Metadata.Phases); !slices.Contains(got, "teardown") {
		t.Errorf("phases %q lack teardown", got)
	}
}

// TestLifecycleTimeoutRecorded: past --timeout the workload is killed and
// its container is recorded as timed out.
func TestLifecycleTimeoutRecorded(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	r.agentExit, r.o.Timeout = -1, 30*time.Millisecond
	res, err := r.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("run: %v, want a timeout", err)
	}
	if code, _ := exitcode.Of(err); code != exitcode.Runtime || res.Metadata.ExitCode != exitcode.Runtime {
		t.Errorf("exit code %d (metadata %d), want %d", code, res.Metadata.ExitCode, exitcode.Runtime)
	}
	timedOut := false
	for _, c := range res.Metadata.Containers {
		timedOut = timedOut || c.Role == orchestrate.RoleAgent && c.TimedOut
	}
	if !timedOut {
		t.Errorf("the agent's container is not recorded as timed out: %+v", res.Metadata.Containers)
	}
	assertAllRemoved(t, r.f)
}

// TestLifecycleKeep: --keep removes nothing and records the command that
// would.
func TestLifecycleKeep(t *testing.T) {
	r := newRig(t, orchestrate.WorkloadCheck)
	r.o.Keep = true
	res, err := r.run(context.Background())
	if err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v", err)
	}
	if _, removed := createdRemoved(r.f.CallList(), nil); len(removed) != 0 {
		t.Errorf("--keep removed %q", removed)
	}
	if !res.Metadata.Kept || len(res.Metadata.RemoveCommand) != 3 || !strings.Contains(res.Metadata.RemoveCommand[2], "docker rm --force") {
		t.Errorf("kept %v, remove command %q", res.Metadata.Kept, res.Metadata.RemoveCommand)
	}
}
