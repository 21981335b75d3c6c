package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// fakeEngine records calls and lets a test script exits and failures.
type fakeEngine struct {
	mu    sync.Mutex
	calls []string

	images      map[string]bool
	buildErr    error
	importErr   error
	createErr   map[string]error // by container name
	ip          string
	stopped     bool           // InspectContainer reports not running
	exitOnStart map[string]int // containers that exit at once, with this code
	waits       map[string]chan dockerx.WaitResult
	removeErr   map[string]error
	containers  []dockerx.Resource
	networks    []dockerx.Resource
	specs       map[string]dockerx.ContainerSpec // by name, as created
	dials       []string                         // "pid addr" of every connection the session made
	netnsErr    error                            // DialNetns fails with it (e.g. EPERM)
	networkErr  func(dockerx.NetworkSpec) error  // CreateNetwork fails with what it returns
	createdNets []dockerx.NetworkSpec            // as created
}

// newTestSession is NewSession with the fake's namespace dialer: it records
// each connection and makes it on this host's loopback (where the tests'
// health servers listen), so a test sees every address the session used.
func newTestSession(f *fakeEngine, plan Plan) *Session {
	s := NewSession(f, plan)
	s.HostPrefixes = func() ([]netip.Prefix, error) { return nil, nil }
	s.DialNetns = func(ctx context.Context, pid int, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		f.record("dial %d %s", pid, host)
		f.mu.Lock()
		f.dials = append(f.dials, fmt.Sprintf("%d %s", pid, addr))
		err := f.netnsErr
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	return s
}

func newFake() *fakeEngine {
	return &fakeEngine{images: map[string]bool{}, createErr: map[string]error{}, exitOnStart: map[string]int{},
		waits: map[string]chan dockerx.WaitResult{}, removeErr: map[string]error{}, ip: "10.99.0.2",
		specs: map[string]dockerx.ContainerSpec{}}
}

func (f *fakeEngine) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeEngine) Version(context.Context) (dockerx.EngineVersion, error) {
	return dockerx.EngineVersion{Version: "27.0.0"}, nil
}

func (f *fakeEngine) InspectImage(_ context.Context, ref string) (dockerx.ImageInfo, bool, error) {
	f.record("inspect-image %s", ref)
	return dockerx.ImageInfo{ID: "sha256:1", Size: 42}, f.images[ref], nil
}

func (f *fakeEngine) BuildImage(_ context.Context, img dockerx.ImageFiles) error {
	f.record("build %s", img.Tag)
	if f.buildErr == nil {
		f.images[img.Tag] = true
	}
	return f.buildErr
}

func (f *fakeEngine) ImportImage(_ context.Context, img dockerx.ImageFiles) error {
	f.record("import %s", img.Tag)
	if f.importErr == nil {
		f.images[img.Tag] = true
	}
	return f.importErr
}

func (f *fakeEngine) CreateNetwork(_ context.Context, n dockerx.NetworkSpec) (string, error) {
	f.record("create-network %s", n.Name)
	if f.networkErr != nil {
		if err := f.networkErr(n); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	f.createdNets = append(f.createdNets, n)
	f.mu.Unlock()
	return "net-" + n.Name, nil
}

func (f *fakeEngine) RemoveNetwork(_ context.Context, id string) error {
	f.record("remove-network %s", id)
	return f.removeErr[id]
}

func (f *fakeEngine) ListNetworks(context.Context, map[string]string) ([]dockerx.Resource, error) {
	return f.networks, nil
}

func (f *fakeEngine) CreateContainer(_ context.Context, c dockerx.ContainerSpec) (string, error) {
	f.record("create %s", c.Name)
	f.mu.Lock()
	f.specs[c.Name] = c
	f.mu.Unlock()
	if err := f.createErr[c.Name]; err != nil {
		return "", err
	}
	f.mu.Lock()
	f.waits["id-"+c.Name] = make(chan dockerx.WaitResult, 1)
	f.mu.Unlock()
	return "id-" + c.Name, nil
}

func (f *fakeEngine) WaitContainer(_ context.Context, id string) <-chan dockerx.WaitResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waits[id]
}

func (f *fakeEngine) StartContainer(_ context.Context, id string) error {
	f.record("start %s", id)
	if code, ok := f.exitOnStart[id]; ok {
		f.exit(id, code)
	}
	return nil
}

func (f *fakeEngine) exit(id string, code int) {
	f.mu.Lock()
	ch := f.waits[id]
	f.mu.Unlock()
	select {
	case ch <- dockerx.WaitResult{ExitCode: code}:
	default:
	}
}

func (f *fakeEngine) AttachContainer(_ context.Context, id string, stdout, _ io.Writer) (<-chan error, error) {
	f.record("attach %s", id)
	done := make(chan error, 1)
	fmt.Fprintf(stdout, "hello from %s\n", id)
	done <- nil
	return done, nil
}

func (f *fakeEngine) Logs(context.Context, string, io.Writer, io.Writer) error { return nil }

func (f *fakeEngine) InspectContainer(_ context.Context, id string) (dockerx.ContainerState, error) {
	if f.stopped {
		return dockerx.ContainerState{ExitCode: 2, IPs: map[string]string{}}, nil
	}
	return dockerx.ContainerState{Running: true, Pid: 4242, IPs: map[string]string{"internal": f.ip}}, nil
}

func (f *fakeEngine) KillContainer(_ context.Context, id, signal string) error {
	f.record("kill %s %s", id, signal)
	f.exit(id, 137)
	return nil
}

func (f *fakeEngine) RemoveContainer(_ context.Context, id string) error {
	f.record("remove %s", id)
	return f.removeErr[id]
}

func (f *fakeEngine) ListContainers(context.Context, map[string]string) ([]dockerx.Resource, error) {
	return f.containers, nil
}

func (f *fakeEngine) PeakMemory(context.Context, string) func() uint64 {
	return func() uint64 { return 1234 }
}

var errBoom = errors.New("boom")
