package sandbox

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx/dockerxtest"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// The lifecycle's tests run Run end to end on the fake engine
// (internal/dockerx/dockerxtest) over sessionBackend, which carries the
// plan out through orchestrate.Session and nothing more (the Docker
// backend's own holds, observations and output places are its package's
// tests): nothing is created, no packet leaves the host (the readiness
// checks reach a test server on loopback), and each test sees every
// engine call in order.

// rig is one lifecycle on the fake engine.
type rig struct {
	t       *testing.T
	f       *dockerxtest.Engine
	o       Options
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
	env := map[string]string{EnvImageBinary: bin, EnvCABundle: ca}
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
	r.o = Options{
		Command: "doctor", Workload: workload,
		Spec:    SpecInput{Name: "built-in default", Spec: sp},
		RunsDir: filepath.Join(dir, "runs"), Timeout: 10 * time.Second, ReadyTimeout: 5 * time.Second,
		GatewayEngine: orchestrate.EngineOurs, SubnetPool: netip.MustParsePrefix(orchestrate.DefaultSubnetPool),
		Getenv: func(k string) string { return env[k] }, Backend: &sessionBackend{},
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
	// Recorded with the address asked for; connected to the test's
	// server, the container's loopback standing in.
	r.f.Dial = func(ctx context.Context, _ int, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", healthAddr)
	}
	return r
}

func (r *rig) run(ctx context.Context) (Result, error) {
	return Run(ctx, r.f, r.o, Output{Out: &r.out, Err: &r.errb})
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

// sessionBackend carries the plan out on the engine through
// orchestrate.Session, and nothing else: no role held or observed, the
// output in the run directory as it is. It is the least backend the
// sequencer's tests need to see containers created on the fake engine.
type sessionBackend struct{}

func (sessionBackend) Name() string                                           { return "session" }
func (sessionBackend) Preflight(context.Context, *Job) error                  { return nil }
func (sessionBackend) Input(*Job, *orchestrate.Input) error                   { return nil }
func (sessionBackend) Outputs(context.Context, *Job, *orchestrate.Plan) error { return nil }

func (sessionBackend) Apply(ctx context.Context, r *Job) error {
	sess := r.Session()
	sess.HostPrefixes = func() ([]netip.Prefix, error) { return nil, nil }
	sess.Release = func(st orchestrate.Step) error { return hold.Release(st.Role, r.HoldToken(), r.RunDir().Write) }
	o := r.Options()
	return sess.Apply(ctx, orchestrate.Hooks{Phase: r.Phase, Done: r.PhaseDone, Stdout: r.WorkloadOutput(), Stderr: r.WorkloadErrors(),
		ReadyTimeout: o.ReadyTimeout, Timeout: o.Timeout, StopAtExit: !o.Keep})
}

func (sessionBackend) Stop(ctx context.Context, r *Job) {
	if !r.Options().Keep {
		r.Session().Stop(ctx)
	}
}

func (sessionBackend) Logs(ctx context.Context, r *Job, c *orchestrate.Container, stdout, stderr io.Writer) error {
	return r.Engine().Logs(ctx, c.ID, stdout, stderr)
}

func (sessionBackend) Teardown(ctx context.Context, r *Job) error {
	if r.Session() == nil {
		return nil
	}
	r.Session().CloseProcesses()
	return r.Session().Teardown(ctx)
}

func (sessionBackend) Checks(*Job) []runs.Check    { return nil }
func (sessionBackend) Isolation(*Job) []runs.Check { return nil }
