package orchestrate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
		"create-network internal", "create-network egress",
		"create gw", "start id-gw", "dial 4242 127.0.0.1",
		"create agent", "attach id-agent", "start id-agent",
		// Teardown: the containers together, then the networks together.
		"remove id-agent", "remove id-gw", "remove-network net-egress", "remove-network net-internal",
	}
	got := slices.Clone(f.Calls)
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
			s.Prepare = func(_ context.Context, role string, pid int) error {
				order = append(order, "prepare "+role+" "+strconv.Itoa(pid))
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
	if _, err := s.dialNetns(ctx, 4242, "10.99.0.2:3128"); err == nil || !strings.Contains(err.Error(), "refusing") {
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
	s.Listening = func(pid, port int) (bool, error) {
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
