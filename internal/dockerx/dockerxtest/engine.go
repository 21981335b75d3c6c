// Package dockerxtest is a fake dockerx.Engine for tests of the packages
// that drive one (orchestrate, sandbox): it records every call in order,
// creates nothing, and lets a test script exits, failures and what the
// engine reports. It is at least as strict as the real engine where a test
// relies on it: a container that was never created cannot be waited for,
// started or removed without an error.
package dockerxtest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// Engine is the fake. Set its fields before the code under test runs;
// read Calls (under no concurrent use) after.
type Engine struct {
	mu sync.Mutex
	// Calls are the operations in order: "create-network NAME",
	// "create NAME", "start ID", "attach ID", "kill ID SIGNAL",
	// "remove ID", "remove-network ID", "inspect-image REF", "build TAG",
	// "import TAG", "dial PID HOST", "tag SOURCE TARGET", "push REF".
	Calls []string

	VersionString string // Version's answer; "" is 27.0.0
	Podman        bool   // Version says the API is Podman's
	VersionErr    error
	// Arch is Version's Arch ("" is amd64); InfoAnswer is Info's answer
	// when set (nil: an amd64 rootful engine that enforces every limit),
	// InfoErr its error.
	Arch         string
	InfoAnswer   *dockerx.EngineInfo
	InfoErr      error
	Images       map[string]bool
	ImageVolumes map[string][]string // InspectImage's Volumes, by reference
	BuildErr     error
	ImportErr    error
	CreateErr    map[string]error // CreateContainer fails, by container name
	StartErr     map[string]error // StartContainer fails, by container id
	IP           string           // each container's address on "internal"
	Stopped      bool             // InspectContainer reports not running
	ExitOnStart  map[string]int   // containers (by id) that exit at once, with this code (a hook may set it: read under hookMu)
	// Ignores lists the signals a container (by id) survives, e.g.
	// {"id-gw": {"TERM"}} for a role that does not exit on SIGTERM: the
	// kill is recorded and accepted, and the container keeps running.
	// Every other signal ends it with 137.
	Ignores map[string][]string
	// Output is what AttachContainer streams to stdout, by container id;
	// the default is "hello from ID\n".
	Output      map[string]string
	RemoveErr   map[string]error
	Containers  []dockerx.Resource               // ListContainers' answer
	Networks    []dockerx.Resource               // ListNetworks' answer
	Specs       map[string]dockerx.ContainerSpec // by name, as created
	Dials       []string                         // "pid addr" of every connection made through DialNetns
	NetnsErr    error                            // DialNetns fails with it (e.g. EPERM)
	NetworkErr  func(dockerx.NetworkSpec) error  // CreateNetwork fails with what it returns
	CreatedNets []dockerx.NetworkSpec            // as created
	// FailOn, when set, is asked before each recorded call that creates
	// or starts something (create-network, create, start, attach, build,
	// import) with the call as Calls holds it; an error fails the call.
	FailOn func(call string) error
	// Failed are the calls FailOn or CreateErr failed (nothing was
	// created by them).
	Failed []string
	// OnCreate, when set, sees each container spec as it is created.
	// OnCreate and OnStart are called one at a time, even when the code
	// under test creates or starts containers together.
	OnCreate func(c dockerx.ContainerSpec)
	// OnStart, when set, is called after a container started (e.g. to
	// make it exit, or to write what the role would write).
	OnStart func(id string)
	hookMu  sync.Mutex
	// Pid is the host pid InspectContainer reports for a running
	// container; 0 is 4242. PidOf, when set and not 0 for the
	// container's id, wins.
	Pid   int
	PidOf func(id string) int
	// IgnoreFixedIPs makes InspectContainer report IP where a fixed
	// address was asked for (an engine that did not honour it).
	IgnoreFixedIPs bool
	// Pushed is the digest PushImage reports for each reference it
	// pushed; PushErr, when set, fails every push (as a registry that
	// refused). A push needs the reference to exist (a TagImage first),
	// as the real engine does.
	Pushed  map[string]string
	PushErr error
	// PushAuths are the X-Registry-Auth values the pushes were given.
	PushAuths []string

	// NotLocal, when set, makes the engine not local for this reason:
	// Process then proves nothing, as the real engine's.
	NotLocal string
	// ProcessErr, when set and not nil for a container's id, fails
	// Process with it (a proof that failed).
	ProcessErr func(id string) error
	// Proven are the processes Process handed out, "PID ID" each;
	// Dropped the pids whose default routes were dropped.
	Proven, Dropped []string
	// A proven process's answers: Dial connects for DialInNetns once it
	// is recorded (nil: to addr on this host's loopback); Listening,
	// WatchExit, Status and Mountinfo answer for its methods (nil: an
	// error; not watched; a hardened role's status; an error).
	Dial      func(ctx context.Context, pid int, addr string) (net.Conn, error)
	Listening func(pid, port int) (bool, error)
	WatchExit func(pid int, id string, stop <-chan struct{}) <-chan struct{}
	Status    func(pid int) (dockerx.ProcStatus, error)
	Mountinfo func(pid int) ([]byte, error)

	// LogsFunc, when set, writes a container's logs (by id) for Logs;
	// nil: none.
	LogsFunc func(id string, stdout, stderr io.Writer)
	// Volumes are the volumes created and not removed, by name.
	Volumes map[string]dockerx.VolumeSpec
	// ExecFunc, when set, answers Exec (recorded "exec ID USER ARGV...");
	// nil: every exec fails.
	ExecFunc func(id, user string, argv []string, stdout, stderr io.Writer) error

	waits   map[string]chan dockerx.WaitResult
	started map[string]bool
}

// New returns an empty fake engine.
func New() *Engine {
	return &Engine{Images: map[string]bool{}, CreateErr: map[string]error{}, StartErr: map[string]error{},
		ExitOnStart: map[string]int{}, Output: map[string]string{}, RemoveErr: map[string]error{}, IP: "10.99.0.2",
		Specs: map[string]dockerx.ContainerSpec{}, Volumes: map[string]dockerx.VolumeSpec{}, waits: map[string]chan dockerx.WaitResult{}, started: map[string]bool{}}
}

// StaticELF is a minimal static x86-64 ELF header followed by tail: enough
// for orchestrate.CheckStatic and an image's content hash.
func StaticELF(tail string) []byte {
	b := make([]byte, 64)
	copy(b, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint16(b[52:], 64) // ehsize
	le.PutUint16(b[54:], 56) // phentsize
	le.PutUint16(b[58:], 64) // shentsize
	return append(b, tail...)
}

// ErrNoSuchContainer is what the fake answers for an id it never created.
var ErrNoSuchContainer = errors.New("dockerxtest: no such container")

// Record appends one call.
func (f *Engine) Record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, fmt.Sprintf(format, args...))
}

// recordFallible records a call and asks FailOn about it.
func (f *Engine) recordFallible(format string, args ...any) error {
	call := fmt.Sprintf(format, args...)
	f.Record("%s", call)
	if f.FailOn == nil {
		return nil
	}
	err := f.FailOn(call)
	if err != nil {
		f.mu.Lock()
		f.Failed = append(f.Failed, call)
		f.mu.Unlock()
	}
	return err
}

// CallList returns a copy of the calls so far (safe while the code under
// test still runs).
func (f *Engine) CallList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.Calls...)
}

// FailedList returns a copy of Failed.
func (f *Engine) FailedList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.Failed...)
}

func (f *Engine) Version(context.Context) (dockerx.EngineVersion, error) {
	v := f.VersionString
	if v == "" {
		v = "27.0.0"
	}
	arch := f.Arch
	if arch == "" {
		arch = "amd64"
	}
	return dockerx.EngineVersion{Version: v, APIVersion: "1.47", Podman: f.Podman, Arch: arch, OS: "linux"}, f.VersionErr
}

func (f *Engine) Info(context.Context) (dockerx.EngineInfo, error) {
	if f.InfoAnswer != nil {
		return *f.InfoAnswer, f.InfoErr
	}
	return dockerx.EngineInfo{Architecture: "x86_64", OSType: "linux", SecurityOptions: []string{"name=seccomp,profile=builtin"},
		CgroupDriver: "systemd", CgroupVersion: "2", MemoryLimit: true, PidsLimit: true, CPULimit: true}, f.InfoErr
}

func (f *Engine) InspectImage(_ context.Context, ref string) (dockerx.ImageInfo, bool, error) {
	f.Record("inspect-image %s", ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	return dockerx.ImageInfo{ID: "sha256:1", Size: 42, Volumes: f.ImageVolumes[ref]}, f.Images[ref], nil
}

func (f *Engine) BuildImage(_ context.Context, img dockerx.ImageFiles) error {
	if err := f.recordFallible("build %s", img.Tag); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.BuildErr == nil {
		f.Images[img.Tag] = true
	}
	return f.BuildErr
}

func (f *Engine) ImportImage(_ context.Context, img dockerx.ImageFiles) error {
	if err := f.recordFallible("import %s", img.Tag); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ImportErr == nil {
		f.Images[img.Tag] = true
	}
	return f.ImportErr
}

// TagImage names an existing image also as target.
func (f *Engine) TagImage(_ context.Context, source, target string) error {
	if err := f.recordFallible("tag %s %s", source, target); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.Images[source] {
		return fmt.Errorf("dockerxtest: no such image: %s", source)
	}
	f.Images[target] = true
	return nil
}

// PushImage "pushes" ref and reports a digest made from its name.
func (f *Engine) PushImage(_ context.Context, ref, auth string) (string, error) {
	if err := f.recordFallible("push %s", ref); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.PushAuths = append(f.PushAuths, auth)
	if !f.Images[ref] {
		return "", fmt.Errorf("dockerxtest: no such image: %s", ref)
	}
	if f.PushErr != nil {
		return "", f.PushErr
	}
	sum := sha256.Sum256([]byte(ref))
	d := "sha256:" + hex.EncodeToString(sum[:])
	if f.Pushed == nil {
		f.Pushed = map[string]string{}
	}
	f.Pushed[ref] = d
	return d, nil
}

func (f *Engine) CreateNetwork(_ context.Context, n dockerx.NetworkSpec) (string, error) {
	if err := f.recordFallible("create-network %s", n.Name); err != nil {
		return "", err
	}
	if f.NetworkErr != nil {
		if err := f.NetworkErr(n); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	f.CreatedNets = append(f.CreatedNets, n)
	f.mu.Unlock()
	return "net-" + n.Name, nil
}

func (f *Engine) RemoveNetwork(_ context.Context, id string) error {
	f.Record("remove-network %s", id)
	return f.RemoveErr[id]
}

func (f *Engine) ListNetworks(context.Context, map[string]string) ([]dockerx.Resource, error) {
	return f.Networks, nil
}

func (f *Engine) CreateContainer(_ context.Context, c dockerx.ContainerSpec) (string, error) {
	ferr := f.recordFallible("create %s", c.Name)
	if f.OnCreate != nil {
		f.hookMu.Lock()
		f.OnCreate(c)
		f.hookMu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Specs[c.Name] = c
	if err := f.CreateErr[c.Name]; err != nil {
		f.Failed = append(f.Failed, "create "+c.Name)
		return "", err
	}
	if ferr != nil {
		return "", ferr
	}
	f.waits["id-"+c.Name] = make(chan dockerx.WaitResult, 1)
	return "id-" + c.Name, nil
}

// WaitContainer yields the exit scripted by Exit, ExitOnStart or a kill
// (of a signal not in Ignores);
// for an unknown id it yields ErrNoSuchContainer at once.
func (f *Engine) WaitContainer(_ context.Context, id string) <-chan dockerx.WaitResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.waits[id]
	if !ok {
		ch = make(chan dockerx.WaitResult, 1)
		ch <- dockerx.WaitResult{ExitCode: -1, Err: ErrNoSuchContainer}
	}
	return ch
}

func (f *Engine) StartContainer(_ context.Context, id string) error {
	if err := f.recordFallible("start %s", id); err != nil {
		return err
	}
	if !f.known(id) {
		return ErrNoSuchContainer
	}
	f.hookMu.Lock() // a hook (OnCreate) may set StartErr
	err := f.StartErr[id]
	f.hookMu.Unlock()
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.started[id] = true
	f.mu.Unlock()
	// A hook (OnCreate) may set ExitOnStart; hooks run under hookMu.
	f.hookMu.Lock()
	code, exits := f.ExitOnStart[id]
	f.hookMu.Unlock()
	if exits {
		f.Exit(id, code)
	}
	if f.OnStart != nil {
		f.hookMu.Lock()
		f.OnStart(id)
		f.hookMu.Unlock()
	}
	return nil
}

func (f *Engine) known(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.waits[id]
	return ok
}

// Exit makes container id exit with code (once; later exits are dropped).
func (f *Engine) Exit(id string, code int) {
	f.mu.Lock()
	ch := f.waits[id]
	f.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- dockerx.WaitResult{ExitCode: code}:
	default:
	}
}

func (f *Engine) AttachContainer(_ context.Context, id string, stdout, _ io.Writer) (<-chan error, error) {
	if err := f.recordFallible("attach %s", id); err != nil {
		return nil, err
	}
	if !f.known(id) {
		return nil, ErrNoSuchContainer
	}
	done := make(chan error, 1)
	f.hookMu.Lock() // a hook (OnCreate) may set Output
	out, ok := f.Output[id]
	f.hookMu.Unlock()
	if !ok {
		out = "hello from " + id + "\n"
	}
	_, _ = io.WriteString(stdout, out)
	done <- nil
	return done, nil
}

func (f *Engine) Logs(_ context.Context, id string, stdout, stderr io.Writer) error {
	if !f.known(id) {
		return ErrNoSuchContainer
	}
	if f.LogsFunc != nil {
		f.LogsFunc(id, stdout, stderr)
	}
	return nil
}

func (f *Engine) InspectContainer(_ context.Context, id string) (dockerx.ContainerState, error) {
	if !f.known(id) {
		return dockerx.ContainerState{}, ErrNoSuchContainer
	}
	f.mu.Lock()
	started := f.started[id]
	f.mu.Unlock()
	if !started { // created, never started: as the engine, not running, no address
		return dockerx.ContainerState{IPs: map[string]string{}}, nil
	}
	if f.Stopped {
		return dockerx.ContainerState{ExitCode: 2, IPs: map[string]string{}}, nil
	}
	pid := f.Pid
	if f.PidOf != nil && f.PidOf(id) != 0 {
		pid = f.PidOf(id)
	}
	if pid == 0 {
		pid = 4242
	}
	f.mu.Lock()
	// An address on every network the container was created on (as the
	// engine reports them, by network name: the fixed one asked for, else
	// IP), and on "internal" for plans that name their networks so.
	ips := map[string]string{"internal": f.IP}
	for _, a := range f.Specs[strings.TrimPrefix(id, "id-")].Networks {
		ips[a.Network] = f.IP
		if !f.IgnoreFixedIPs {
			ips[a.Network] = cmp.Or(a.IPv4, f.IP)
		}
	}
	f.mu.Unlock()
	return dockerx.ContainerState{Running: true, Pid: pid, IPs: ips}, nil
}

func (f *Engine) KillContainer(_ context.Context, id, signal string) error {
	f.Record("kill %s %s", id, signal)
	f.mu.Lock()
	started := f.started[id]
	f.mu.Unlock()
	if f.Stopped || !started { // as the engine: 409, the container is not running
		return fmt.Errorf("cannot kill container %s: container is not running", id)
	}
	f.mu.Lock()
	ignored := slices.Contains(f.Ignores[id], signal)
	f.mu.Unlock()
	if !ignored {
		f.Exit(id, 137)
	}
	return nil
}

func (f *Engine) RemoveContainer(_ context.Context, id string) error {
	f.Record("remove %s", id)
	return f.RemoveErr[id]
}

func (f *Engine) ListContainers(context.Context, map[string]string) ([]dockerx.Resource, error) {
	return f.Containers, nil
}

func (f *Engine) PeakMemory(context.Context, string) func() uint64 {
	return func() uint64 { return 1234 }
}

// DialNetns stands for dockerx.DialInNetns: it records the connection and
// makes it on this host's loopback (where a test's servers listen), so a
// test sees every address the code under test used.
func (f *Engine) DialNetns(ctx context.Context, pid int, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	f.Record("dial %d %s", pid, host)
	f.mu.Lock()
	f.Dials = append(f.Dials, fmt.Sprintf("%d %s", pid, addr))
	err := f.NetnsErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if f.Dial != nil {
		return f.Dial(ctx, pid, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

var _ dockerx.Engine = (*Engine)(nil)
var _ dockerx.Pusher = (*Engine)(nil)

// CreateVolume records "create-volume NAME"; a name in use is an error,
// as on the real engine's CreateVolume.
func (f *Engine) CreateVolume(_ context.Context, v dockerx.VolumeSpec) error {
	if err := f.recordFallible("create-volume %s", v.Name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.Volumes[v.Name]; ok {
		return fmt.Errorf("dockerxtest: volume %s exists", v.Name)
	}
	f.Volumes[v.Name] = v
	return nil
}

// VolumeOptions answers for a volume CreateVolume made.
func (f *Engine) VolumeOptions(_ context.Context, name string) (string, map[string]string, map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.Volumes[name]
	if !ok {
		return "", nil, nil, fmt.Errorf("dockerxtest: no such volume %s", name)
	}
	return "local", v.DriverOpts, v.Labels, nil
}

// RemoveVolume records "remove-volume NAME".
func (f *Engine) RemoveVolume(_ context.Context, name string) error {
	f.Record("remove-volume %s", name)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Volumes, name)
	return nil
}

// ListVolumes lists the volumes created and not removed that carry every
// label given (a label with an empty value: any value).
func (f *Engine) ListVolumes(_ context.Context, labels map[string]string) ([]dockerx.Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []dockerx.Resource
	for name, v := range f.Volumes {
		match := true
		for k, want := range labels {
			if got, ok := v.Labels[k]; !ok || (want != "" && got != want) {
				match = false
			}
		}
		if match {
			out = append(out, dockerx.Resource{ID: name, Name: name, Labels: v.Labels})
		}
	}
	slices.SortFunc(out, func(a, b dockerx.Resource) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Exec records "exec ID USER ARGV..." and answers with ExecFunc; the
// container must have been started and not removed.
func (f *Engine) Exec(_ context.Context, id, user string, argv []string, stdout, stderr io.Writer) error {
	f.Record("exec %s %s %s", id, user, strings.Join(argv, " "))
	if !f.known(id) {
		return ErrNoSuchContainer
	}
	if f.ExecFunc == nil {
		return errors.New("dockerxtest: exec not scripted")
	}
	return f.ExecFunc(id, user, argv, stdout, stderr)
}
