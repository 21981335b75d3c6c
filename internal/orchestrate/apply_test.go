package orchestrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// testPlan has two networks, a service with a readiness check on port, and
// the workload.
func testPlan(port int) Plan {
	return Plan{RunID: "r", Networks: []dockerx.NetworkSpec{{Name: "internal", Internal: true}, {Name: "egress"}},
		Containers: []Step{
			{Role: RoleGateway, Spec: dockerx.ContainerSpec{Name: "gw"}, Ready: &Readiness{Port: port, Path: "/healthz"}},
			{Role: RoleAgent, Spec: dockerx.ContainerSpec{Name: "agent"}, Workload: true},
		}}
}

func healthServer(t *testing.T, status int) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	port, _ := strconv.Atoi(p)
	return port
}

func TestSessionHappyPathAndTeardownOrder(t *testing.T) {
	f := newFake()
	s := newTestSession(f, testPlan(healthServer(t, http.StatusOK)))
	ctx := context.Background()
	if err := s.CreateNetworks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartService(ctx, RoleGateway, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := s.StartWorkload(ctx, RoleAgent, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	go f.Exit("id-agent", 3)
	code, err := s.Wait(ctx, w, 5*time.Second)
	if err != nil || code != 3 {
		t.Fatalf("Wait = %d, %v; want 3, nil", code, err)
	}
	if out.String() != "hello from id-agent\n" {
		t.Errorf("streamed %q", out.String())
	}
	if err := s.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		// The networks together, then each container as its phase comes
		// (this plan's internal network has no subnet, so no address is
		// fixed and nothing is created ahead).
		"create-network egress", "create-network internal",
		"create gw", "start id-gw", "dial 4242 127.0.0.1",
		"create agent", "attach id-agent", "start id-agent",
		// Teardown: the containers together, then the networks together.
		"remove id-agent", "remove id-gw", "remove-network net-egress", "remove-network net-internal",
	}
	got := slices.Clone(f.Calls)
	slices.Sort(got[:2])
	if n := len(got); n >= 4 {
		slices.Sort(got[n-4 : n-2])
		slices.Sort(got[n-2:])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if c := s.Find(RoleAgent); c == nil || *c.ExitCode != 3 || c.PeakMemory() != 1234 {
		t.Errorf("agent record %+v", c)
	}
}

func TestStartServiceFailures(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		exit    bool
		wantErr string
	}{
		{"exits before ready", http.StatusServiceUnavailable, true, "gateway exited with code 2 before it was ready"},
		{"never ready", http.StatusServiceUnavailable, false, "gateway not ready after"},
		{"gone before inspect", http.StatusOK, true, "gateway exited with code 2 before it was ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			if tt.exit {
				f.ExitOnStart["id-gw"] = 2
			}
			f.Stopped = tt.name == "gone before inspect"
			s := newTestSession(f, testPlan(healthServer(t, tt.status)))
			err := s.StartService(context.Background(), RoleGateway, 300*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
			if err := s.Teardown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if f.Calls[len(f.Calls)-1] != "remove id-gw" {
				t.Errorf("the failed container was not removed: %v", f.Calls)
			}
		})
	}
}

func TestWaitTimeoutAndCancel(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		t.Run(map[bool]string{false: "timeout", true: "signal"}[cancelled], func(t *testing.T) {
			f := newFake()
			s := newTestSession(f, testPlan(0))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := s.StartWorkload(ctx, RoleAgent, &bytes.Buffer{}, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			timeout := 50 * time.Millisecond
			if cancelled {
				timeout = time.Hour
				cancel()
			}
			_, err = s.Wait(ctx, w, timeout)
			want := map[bool]string{false: "still running after the 50ms timeout; killed", true: "agent interrupted"}[cancelled]
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want %q", err, want)
			}
			c := s.Find(RoleAgent)
			if c.TimedOut == cancelled || c.ExitCode == nil || *c.ExitCode != 137 {
				t.Errorf("timed_out %v exit %v", c.TimedOut, c.ExitCode)
			}
		})
	}
}

func TestTeardownKeepsGoing(t *testing.T) {
	f := newFake()
	f.RemoveErr["id-gw"] = errBoom
	s := newTestSession(f, testPlan(healthServer(t, 200)))
	ctx := context.Background()
	if err := s.CreateNetworks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartService(ctx, RoleGateway, time.Second); err != nil {
		t.Fatal(err)
	}
	err := s.Teardown(ctx)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("got %v, want the removal error", err)
	}
	if !slices.Contains(f.Calls, "remove-network net-internal") || !slices.Contains(f.Calls, "remove-network net-egress") {
		t.Errorf("teardown stopped early: %v", f.Calls)
	}
}

func TestRemoveCommand(t *testing.T) {
	f := newFake()
	s := newTestSession(f, testPlan(healthServer(t, 200)))
	ctx := context.Background()
	_ = s.CreateNetworks(ctx)
	_ = s.StartService(ctx, RoleGateway, time.Second)
	got := s.RemoveCommand()
	want := []string{"sh", "-c", "docker rm --force gw && docker network rm internal egress"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOrphans(t *testing.T) {
	res := func(name, app, host, pid string) dockerx.Resource {
		return dockerx.Resource{ID: name, Name: name, Labels: map[string]string{LabelApp: app, LabelHost: host, LabelPID: pid}}
	}
	in := []dockerx.Resource{
		res("dead", "1", "here", "100"),
		res("alive", "1", "here", "200"),
		res("other-host", "1", "there", "100"),
		res("no-pid", "1", "here", ""),
		res("bad-pid", "1", "here", "x"),
		res("not-ours", "", "here", "100"),
	}
	alive := func(pid int) bool { return pid == 200 }
	var got []string
	for _, r := range Orphans(in, "here", alive) {
		got = append(got, r.Name)
	}
	if diff := cmp.Diff([]string{"dead"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestGC(t *testing.T) {
	f := newFake()
	dead := map[string]string{LabelApp: "1", LabelHost: "h", LabelPID: "7"}
	f.Containers = []dockerx.Resource{{ID: "c1", Labels: dead}}
	f.Networks = []dockerx.Resource{{ID: "n1", Labels: dead}}
	got, err := GC(context.Background(), f, "h", func(int) bool { return false })
	if err != nil || len(got.Containers) != 1 || len(got.Networks) != 1 {
		t.Fatalf("GC = %+v, %v", got, err)
	}
	if diff := cmp.Diff([]string{"remove c1", "remove-network n1"}, f.Calls); diff != "" {
		t.Errorf("containers must go before networks (-want +got):\n%s", diff)
	}
}

func TestEnsureImage(t *testing.T) {
	img := dockerx.ImageFiles{Tag: "mcpsidecar:t"}
	tests := []struct {
		name        string
		have        bool
		buildErr    error
		importErr   error
		forceImport bool
		want        string
		wantCalls   []string
		wantErr     string
	}{
		{"reused", true, nil, nil, false, MethodReused, []string{"inspect-image mcpsidecar:t"}, ""},
		{"built", false, nil, nil, false, MethodBuild, []string{"inspect-image mcpsidecar:t", "build mcpsidecar:t", "inspect-image mcpsidecar:t"}, ""},
		{"builder refused", false, errBoom, nil, false, MethodImport, []string{"inspect-image mcpsidecar:t", "build mcpsidecar:t", "import mcpsidecar:t", "inspect-image mcpsidecar:t"}, ""},
		{"forced import", false, nil, nil, true, MethodImport, []string{"inspect-image mcpsidecar:t", "import mcpsidecar:t", "inspect-image mcpsidecar:t"}, ""},
		{"both fail", false, errBoom, errBoom, false, "", nil, "boom; falling back to import: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.Images[img.Tag] = tt.have
			f.BuildErr, f.ImportErr = tt.buildErr, tt.importErr
			got, _, err := EnsureImage(context.Background(), f, img, tt.forceImport)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			if diff := cmp.Diff(tt.wantCalls, f.Calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckStatic(t *testing.T) {
	if err := CheckStatic([]byte("#!/bin/sh\n")); err == nil || !strings.Contains(err.Error(), "as ELF") {
		t.Errorf("a script: got %v", err)
	}
}

func TestHeldStepIsPreparedThenReleased(t *testing.T) {
	tests := []struct {
		name       string
		stopped    bool
		noRelease  bool
		prepareErr error
		wantErr    string
		wantOrder  []string
	}{
		{"released", false, false, nil, "", []string{"prepare agent 4242", "release agent"}},
		{"stopped first", true, false, nil, "agent stopped before it was released", nil},
		{"prepare fails", false, false, errBoom, "boom", []string{"prepare agent 4242"}},
		{"no release function", false, true, nil, "no release function", []string{"prepare agent 4242"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.Stopped = tt.stopped
			plan := testPlan(0)
			plan.Containers[1].Hold = true
			s := newTestSession(f, plan)
			var order []string
			s.Prepare = func(_ context.Context, c *Container) error {
				order = append(order, "prepare "+c.Step.Role+" "+strconv.Itoa(c.Process.Pid()))
				return tt.prepareErr
			}
			if !tt.noRelease {
				s.Release = func(st Step) error {
					order = append(order, "release "+st.Role)
					return nil
				}
			}
			_, err := s.StartWorkload(context.Background(), RoleAgent, &bytes.Buffer{}, &bytes.Buffer{})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantOrder, order); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestTCPReadiness: a Squid gateway is ready once its port accepts a
// connection; a port nobody listens on is never ready.
func TestTCPReadiness(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().(*net.TCPAddr).Port
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	t.Cleanup(func() { ln.Close() })
	tests := []struct {
		name    string
		port    int
		wantErr string
	}{
		{"listening", open, ""},
		{"nobody listens", closedPort, "gateway not ready after 300ms: TCP connect 127.0.0.1:" + strconv.Itoa(closedPort)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPlan(tt.port)
			p.Containers[0].Ready.TCP, p.Containers[0].Ready.Path = true, ""
			s := newTestSession(newFake(), p)
			err := s.StartService(context.Background(), RoleGateway, 300*time.Millisecond)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("StartService: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// The host never connects to a container's network address: readiness is
// checked on the container's own loopback, from inside its namespace. With
// the host holding no address on the internal network, a connection to a
// container's internal address would leave by the host's default route.
func TestReadinessNeverDialsAContainerAddress(t *testing.T) {
	f := newFake() // the container's internal address is 10.99.0.2
	s := newTestSession(f, testPlan(healthServer(t, http.StatusOK)))
	ctx := context.Background()
	if err := s.CreateNetworks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartService(ctx, RoleGateway, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(f.Dials) == 0 {
		t.Fatal("readiness made no connection")
	}
	for _, d := range f.Dials {
		if !strings.HasPrefix(d, "4242 127.0.0.1:") {
			t.Errorf("the session connected to %q; want only the container's (pid 4242) loopback", d)
		}
	}
	if _, err := dialNetns(ctx, s.Find(RoleGateway).Process, "10.99.0.2:3128"); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("dialNetns to a container address = %v, want a refusal", err)
	}
}

// Without the privilege to enter the namespace, readiness falls back to
// the listening socket and says so.
func TestReadinessFallsBackToListeningSocket(t *testing.T) {
	f := newFake()
	f.NetnsErr = fmt.Errorf("entering the network namespace: %w", syscall.EPERM)
	s := newTestSession(f, testPlan(3128))
	calls := 0
	f.Listening = func(pid, port int) (bool, error) {
		calls++
		if pid != 4242 || port != 3128 {
			t.Errorf("Listening(%d, %d), want (4242, 3128)", pid, port)
		}
		return calls > 2, nil
	}
	ctx := context.Background()
	if err := s.CreateNetworks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartService(ctx, RoleGateway, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := s.Find(RoleGateway); c.ReadyBy != ReadyByListening {
		t.Errorf("ReadyBy = %q, want %q", c.ReadyBy, ReadyByListening)
	}
}

// An internal-only role gets its peers' internal addresses as host
// entries, so it needs no resolver.
func TestHostEntriesFromPeers(t *testing.T) {
	f := newFake()
	plan := testPlan(healthServer(t, http.StatusOK))
	plan.Containers[1].Hosts = []HostAlias{{Name: "egress-gateway", Role: RoleGateway}}
	s := newTestSession(f, plan)
	ctx := context.Background()
	if err := s.CreateNetworks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartService(ctx, RoleGateway, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartWorkload(ctx, RoleAgent, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := f.Specs["agent"].ExtraHosts
	if diff := cmp.Diff([]string{"egress-gateway:10.99.0.2"}, got); diff != "" {
		t.Errorf("agent ExtraHosts (-want +got):\n%s", diff)
	}
	if len(s.Plan.Containers[1].Spec.ExtraHosts) != 0 {
		t.Errorf("the plan was changed: %v", s.Plan.Containers[1].Spec.ExtraHosts)
	}
}

// A peer that has no internal address stops the run before the container
// is created.
func TestHostEntriesMissingPeer(t *testing.T) {
	f := newFake()
	plan := testPlan(0)
	plan.Containers[1].Hosts = []HostAlias{{Name: "mcp-sidecar", Role: RoleSidecar}}
	s := newTestSession(f, plan)
	_, err := s.StartWorkload(context.Background(), RoleAgent, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "mcp-sidecar") {
		t.Fatalf("err = %v, want one naming mcp-sidecar", err)
	}
	if _, ok := f.Specs["agent"]; ok {
		t.Error("the agent was created")
	}
}

// TestStopSignalsRunningOnly: Stop sends TERM to a running server and
// records its exit code; a container the engine says is not running (its
// kill refused) is looked at, left without an exit code, and not waited
// for.
func TestStopSignalsRunningOnly(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "not running"}[stopped], func(t *testing.T) {
			f := newFake()
			s := newTestSession(f, testPlan(healthServer(t, 200)))
			ctx := context.Background()
			if err := s.CreateNetworks(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.StartService(ctx, RoleGateway, time.Second); err != nil {
				t.Fatal(err)
			}
			f.Stopped = stopped
			start := time.Now()
			s.Stop(ctx)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Stop took %v", d)
			}
			c := s.Find(RoleGateway)
			if !slices.Contains(f.Calls, "kill id-gw TERM") {
				t.Errorf("no TERM sent: %v", f.Calls)
			}
			if stopped {
				if c.ExitCode != nil {
					t.Errorf("exit code %d recorded for a container that was not running", *c.ExitCode)
				}
				return
			}
			if c.ExitCode == nil || *c.ExitCode != 137 {
				t.Errorf("exit code %v, want 137 (the fake's TERM exit)", c.ExitCode)
			}
		})
	}
}

// orderRig is a three-role plan as the default spec makes it on an engine
// that needs holds (the sidecar and the agent internal-only, held), on
// networks with subnets, and one list of what happened in order: engine
// starts, readiness answers, releases.
type orderRig struct {
	f      *fakeEngine
	s      *Session
	mu     sync.Mutex
	events []string
}

func (r *orderRig) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *orderRig) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// newOrderRig: held says whether the sidecar and the agent are held;
// notReady is how many readiness checks the gateway fails first (-1: it
// never gets ready).
func newOrderRig(t *testing.T, held bool, notReady int) *orderRig {
	t.Helper()
	r := &orderRig{f: newFake()}
	pids := map[string]int{"id-gw": 101, "id-sc": 102, "id-agent": 103}
	roles := map[int]string{101: RoleGateway, 102: RoleSidecar, 103: RoleAgent}
	r.f.PidOf = func(id string) int { return pids[id] }
	r.f.OnStart = func(id string) {
		r.note("start " + roles[pids[id]])
		if id == "id-agent" {
			r.f.Exit(id, 0)
		}
	}
	var mu sync.Mutex
	checks := map[string]int{}
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		role := req.Host // the dialer below names the role as the host
		mu.Lock()
		checks[role]++
		n := checks[role]
		mu.Unlock()
		if role == RoleGateway && (notReady < 0 || n <= notReady) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.note(role + " ready")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(health.Close)
	addr := strings.TrimPrefix(health.URL, "http://")
	plan := Plan{RunID: "r", SubnetPool: "10.213.0.0/16",
		Networks: []dockerx.NetworkSpec{{Name: "internal", Internal: true, Subnet: "10.213.0.0/28"}, {Name: "egress", Subnet: "10.213.0.16/28"}},
		Containers: []Step{
			{Role: RoleGateway, Spec: dockerx.ContainerSpec{Name: "gw", Networks: []dockerx.Attachment{{Network: "egress"}, {Network: "internal", Aliases: []string{"egress-gateway"}}}},
				Ready: &Readiness{Port: 3128, Path: "/healthz"}},
			{Role: RoleSidecar, Spec: dockerx.ContainerSpec{Name: "sc", Networks: []dockerx.Attachment{{Network: "internal", Aliases: []string{"mcp-sidecar"}}}},
				Ready: &Readiness{Port: 8000, Path: "/healthz"}, Hold: held, Hosts: []HostAlias{{Name: "egress-gateway", Role: RoleGateway}}},
			{Role: RoleAgent, Spec: dockerx.ContainerSpec{Name: "agent", Networks: []dockerx.Attachment{{Network: "internal"}}}, Workload: true, Hold: held,
				Hosts: []HostAlias{{Name: "egress-gateway", Role: RoleGateway}, {Name: "mcp-sidecar", Role: RoleSidecar}}},
		}}
	r.s = newTestSession(r.f, plan)
	r.f.Dial = func(ctx context.Context, pid int, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &hostConn{Conn: c, host: roles[pid]}, nil
	}
	r.s.Prepare = func(context.Context, *Container) error { return nil }
	r.s.Release = func(st Step) error {
		r.note("release " + st.Role)
		return nil
	}
	return r
}

// hostConn rewrites the Host header of the one request sent on it, so the
// test's server knows which container's loopback it stands for.
type hostConn struct {
	net.Conn
	host string
	done bool
}

func (c *hostConn) Write(p []byte) (int, error) {
	if !c.done {
		c.done = true
		q := bytes.Replace(p, []byte("\r\nHost: 127.0.0.1:"), []byte("\r\nHost: "+c.host+"\r\nX-Port: "), 1)
		if _, err := c.Conn.Write(q); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (r *orderRig) apply(t *testing.T) error {
	t.Helper()
	return r.s.Apply(context.Background(), Hooks{ReadyTimeout: 2 * time.Second, Timeout: 5 * time.Second})
}

func before(t *testing.T, events []string, first, then string) {
	t.Helper()
	i, j := slices.Index(events, first), slices.Index(events, then)
	if i < 0 || j < 0 || i > j {
		t.Errorf("%q must come before %q: %q", first, then, events)
	}
}

// TestApplyOrderHeld: with holds, every container is created in the
// gateway's phase (each with its planned address, its peers' host entries
// naming theirs), the sidecar is started while the gateway is becoming
// ready, released only once it is ready, and the agent started only once
// the gateway and the sidecar are both ready.
func TestApplyOrderHeld(t *testing.T) {
	r := newOrderRig(t, true, 3)
	if err := r.apply(t); err != nil {
		t.Fatalf("Apply: %v\nevents %q\ncalls %q", err, r.list(), r.f.Calls)
	}
	ev := r.list()
	before(t, ev, "start sidecar", "gateway ready") // started ahead: the overlap
	before(t, ev, "gateway ready", "release sidecar")
	before(t, ev, "release sidecar", "sidecar ready")
	before(t, ev, "gateway ready", "start agent")
	before(t, ev, "sidecar ready", "start agent")
	before(t, ev, "start agent", "release agent")
	if c := r.s.Find(RoleSidecar); !c.StartedAhead {
		t.Errorf("the sidecar was not started ahead")
	}
	if c := r.s.Find(RoleAgent); c.StartedAhead {
		t.Errorf("the agent was started ahead")
	}
	assertCreatedAhead(t, r.f.Calls, "attach id-agent")
	wantHosts := map[string][]string{"sc": {"egress-gateway:10.213.0.2"}, "agent": {"egress-gateway:10.213.0.2", "mcp-sidecar:10.213.0.3"}}
	wantIP := map[string]string{"gw": "10.213.0.2", "sc": "10.213.0.3", "agent": "10.213.0.4"}
	for name, spec := range r.f.Specs {
		if diff := cmp.Diff(wantHosts[name], spec.ExtraHosts, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s ExtraHosts (-want +got):\n%s", name, diff)
		}
		for _, a := range spec.Networks {
			if want := map[bool]string{true: wantIP[name]}[a.Network == "internal"]; a.IPv4 != want {
				t.Errorf("%s on %s: address %q, want %q", name, a.Network, a.IPv4, want)
			}
		}
	}
	if c := r.s.Find(RoleSidecar); c.IPs["internal"] != "10.213.0.3" || c.Pid != 102 {
		t.Errorf("sidecar record: IPs %v pid %d", c.IPs, c.Pid)
	}
}

// assertCreatedAhead: the networks are created before any container, and
// every container before the call named by, in the first service's
// phase (the rest created beside the first service's start).
func assertCreatedAhead(t *testing.T, calls []string, by string) {
	t.Helper()
	lastNet, firstCreate, lastCreate, creates := -1, len(calls), -1, 0
	for i, c := range calls {
		switch verb, _, _ := strings.Cut(c, " "); verb {
		case "create-network":
			lastNet = i
		case "create":
			creates++
			lastCreate, firstCreate = i, min(firstCreate, i)
		}
	}
	if creates != 3 || lastNet > firstCreate || lastCreate > slices.Index(calls, by) {
		t.Errorf("want the networks, then the three containers created before %q: %q", by, calls)
	}
}

// TestApplyOrderUnheld: without holds (an engine that needs none), the
// containers are still created in the gateway's phase, but each service
// starts only once the one before it is ready, as the sidecar would
// otherwise reach for the gateway before it listens.
func TestApplyOrderUnheld(t *testing.T) {
	r := newOrderRig(t, false, 2)
	if err := r.apply(t); err != nil {
		t.Fatalf("Apply: %v\nevents %q", err, r.list())
	}
	ev := r.list()
	before(t, ev, "gateway ready", "start sidecar")
	before(t, ev, "sidecar ready", "start agent")
	if slices.Contains(ev, "release sidecar") || r.s.Find(RoleSidecar).StartedAhead {
		t.Errorf("an unheld sidecar was released or started ahead: %q", ev)
	}
	assertCreatedAhead(t, r.f.Calls, "start id-sc") // all in the gateway's phase
}

// TestApplyGatewayNeverReady: the gateway never gets ready; the sidecar,
// started ahead, is never released, the agent never started, and teardown
// removes all three containers created up front, then both networks.
func TestApplyGatewayNeverReady(t *testing.T) {
	r := newOrderRig(t, true, -1)
	err := r.s.Apply(context.Background(), Hooks{ReadyTimeout: 300 * time.Millisecond, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "gateway not ready after 300ms") {
		t.Fatalf("Apply: %v, want the gateway not ready", err)
	}
	ev := r.list()
	for _, e := range []string{"release sidecar", "start agent", "release agent"} {
		if slices.Contains(ev, e) {
			t.Errorf("%q happened though the gateway never got ready: %q", e, ev)
		}
	}
	r.s.Stop(context.Background())
	if err := r.s.Teardown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, c := range r.f.Calls {
		if v, arg, _ := strings.Cut(c, " "); v == "remove" || v == "remove-network" {
			removed = append(removed, arg)
		}
	}
	n := len(removed)
	if n != 5 {
		t.Fatalf("removed %q, want 3 containers and 2 networks", removed)
	}
	slices.Sort(removed[:3])
	slices.Sort(removed[3:])
	if diff := cmp.Diff([]string{"id-agent", "id-gw", "id-sc", "net-egress", "net-internal"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

// TestApplyWrongAddress: an engine that did not give a container its
// planned address fails the run at that container: its peers' host
// entries would name another address.
func TestApplyWrongAddress(t *testing.T) {
	r := newOrderRig(t, true, 0)
	r.f.IgnoreFixedIPs = true
	err := r.apply(t)
	if err == nil || !strings.Contains(err.Error(), `gateway has the address "10.99.0.2" on network internal, not the planned 10.213.0.2`) {
		t.Fatalf("Apply: %v, want the address refused", err)
	}
	if slices.Contains(r.list(), "start agent") {
		t.Errorf("the agent was started: %q", r.list())
	}
}

// TestApplyCreateAheadFailure: a container that could not be created ahead
// fails its own phase, not an earlier one: the gateway still starts and
// gets ready, the sidecar's creation is tried again in its phase.
func TestApplyCreateAheadFailure(t *testing.T) {
	r := newOrderRig(t, true, 0)
	r.f.FailOn = func(call string) error {
		if call == "create sc" {
			return errBoom
		}
		return nil
	}
	var failed string
	err := r.s.Apply(context.Background(), Hooks{ReadyTimeout: 2 * time.Second, Timeout: time.Second,
		Phase: func(name string, run func() error) error {
			err := run()
			if err != nil && failed == "" {
				failed = name
			}
			return err
		}})
	if !errors.Is(err, errBoom) || failed != RoleSidecar {
		t.Fatalf("Apply: %v in phase %q, want boom in the sidecar's", err, failed)
	}
	if n := strings.Count(strings.Join(r.f.Calls, "\n"), "create sc"); n != 2 {
		t.Errorf("the sidecar's creation was tried %d times, want 2 (ahead, then in its phase): %q", n, r.f.Calls)
	}
	if !slices.Contains(r.list(), "gateway ready") || slices.Contains(r.list(), "start agent") {
		t.Errorf("events %q", r.list())
	}
}

// TestStopAtExit: once the workload's init is gone (as the host sees it,
// before the engine reports the exit), the running services are sent
// SIGTERM; Stop then waits for them without signalling again. Without
// StopAtExit (--keep), nothing is signalled.
func TestStopAtExit(t *testing.T) {
	for _, early := range []bool{true, false} {
		t.Run(map[bool]string{true: "stop at exit", false: "keep"}[early], func(t *testing.T) {
			r := newOrderRig(t, true, 0)
			r.f.OnStart = func(id string) { r.note("start " + id) } // the agent keeps running
			gone := make(chan struct{})
			var watched []string
			r.f.WatchExit = func(pid int, id string, _ <-chan struct{}) <-chan struct{} {
				watched = append(watched, fmt.Sprintf("%d %s", pid, id))
				return gone
			}
			errc := make(chan error, 1)
			go func() {
				errc <- r.s.Apply(context.Background(), Hooks{ReadyTimeout: 2 * time.Second, Timeout: 5 * time.Second, StopAtExit: early})
			}()
			deadline := time.Now().Add(5 * time.Second)
			for !slices.Contains(r.list(), "start id-agent") && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			close(gone) // the agent's init has ended; the engine has not said so yet
			time.Sleep(100 * time.Millisecond)
			kills := func() (n int) {
				for _, c := range r.f.CallList() {
					if strings.HasPrefix(c, "kill ") {
						n++
					}
				}
				return n
			}
			if got, want := kills(), map[bool]int{true: 2, false: 0}[early]; got != want {
				t.Errorf("%d services signalled before the engine reported the exit, want %d: %q", got, want, r.f.CallList())
			}
			if slices.Contains(r.f.CallList(), "kill id-agent TERM") {
				t.Errorf("the workload was signalled")
			}
			r.f.Exit("id-agent", 0)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if early && !slices.Equal(watched, []string{"103 id-agent"}) {
				t.Errorf("watched %q, want the agent's init", watched)
			}
			r.s.Stop(context.Background())
			if got := kills(); got != 2 {
				t.Errorf("%d signals in all, want one per service: %q", got, r.f.CallList())
			}
			for _, role := range []string{RoleGateway, RoleSidecar} {
				if c := r.s.Find(role); c.ExitCode == nil {
					t.Errorf("%s: no exit code recorded", role)
				}
			}
		})
	}
}

// TestStopAfter: a service whose step says to stop after another (the
// gateway, which an online sidecar still uses to close its upstream
// sessions) is signalled only once that one has exited, also when the
// others are signalled at the workload's end.
func TestStopAfter(t *testing.T) {
	r := newOrderRig(t, true, 0)
	r.s.Plan.Containers[0].StopAfter = []string{RoleSidecar}
	r.f.OnStart = func(id string) { r.note("start " + id) }
	gone := make(chan struct{})
	r.f.WatchExit = func(int, string, <-chan struct{}) <-chan struct{} { return gone }
	errc := make(chan error, 1)
	go func() {
		errc <- r.s.Apply(context.Background(), Hooks{ReadyTimeout: 2 * time.Second, Timeout: 5 * time.Second, StopAtExit: true})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(r.list(), "start id-agent") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(gone)
	time.Sleep(100 * time.Millisecond)
	if calls := r.f.CallList(); slices.Contains(calls, "kill id-gw TERM") || !slices.Contains(calls, "kill id-sc TERM") {
		t.Errorf("at the workload's end, want the sidecar signalled and not the gateway: %q", calls)
	}
	r.f.Exit("id-agent", 0)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r.s.Stop(context.Background())
	calls := r.f.CallList()
	if i, j := slices.Index(calls, "kill id-sc TERM"), slices.Index(calls, "kill id-gw TERM"); i < 0 || j < i {
		t.Errorf("want the gateway signalled after the sidecar: %q", calls)
	}
	for _, role := range []string{RoleGateway, RoleSidecar} {
		if c := r.s.Find(role); c.ExitCode == nil {
			t.Errorf("%s: no exit code recorded", role)
		}
	}
}
