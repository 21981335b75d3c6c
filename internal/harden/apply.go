//go:build linux

package harden

import (
	"fmt"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/net/bpf"
)

// system is the kernel interface Apply uses; tests replace parts of it
// (e.g. an ABI probe that answers 0) to prove Apply fails closed.
type system struct {
	landlockABI func() (int, error)
	restrict    func(landlockPlan) error
	seccomp     func([]bpf.Instruction) error
	noNewPrivs  func() error
	kernel      func() Kernel
}

var host = system{
	landlockABI: kernelABI,
	restrict:    restrictLandlock,
	seccomp:     loadSeccomp,
	noNewPrivs:  allThreadsNoNewPrivs,
	kernel:      measureKernel,
}

// Apply locks the calling process down to p, on all threads at once:
// Go runtime limits and SIGXFSZ first, then no_new_privs, the Landlock
// ruleset (filesystem, TCP ports, scopes) and the seccomp filter. It is
// irreversible. A layer the kernel cannot enforce returns an
// [*UnavailableError] unless p lists it in BestEffort, in which case the
// Report carries the degradation. The Report is returned in every case.
func Apply(p Policy) (Report, error) { return host.apply(p) }

func (s system) apply(p Policy) (rep Report, err error) {
	start := time.Now()
	rep = Report{Schema: ReportSchema, Role: p.Role, Layers: []LayerStatus{}, Degradations: []string{}, DeniedSyscalls: []string{}}
	defer func() {
		rep.DurationMicros = time.Since(start).Microseconds()
		rep.setError(err)
	}()
	if err := p.Validate(); err != nil {
		return rep, err
	}
	rep.Kernel = s.kernel() // before Landlock, which grants no /sys
	applyRuntime(p, &rep)
	if err := s.noNewPrivs(); err != nil {
		return rep, fmt.Errorf("setting no_new_privs on all threads: %w", err)
	}
	rep.NoNewPrivs = true
	abi, err := s.landlockABI()
	if err != nil {
		return rep, &UnavailableError{Layer: LayerLandlockFS, Reason: "probing the Landlock ABI", Err: err}
	}
	rep.KernelLandlockABI = abi
	netOn, err := s.applyLandlock(p, abi, &rep)
	if err != nil {
		return rep, err
	}
	return rep, s.applySeccomp(p, netOn, &rep)
}

// applyRuntime matches the Go runtime to the container's limits and makes
// a write past RLIMIT_FSIZE fail with EFBIG instead of raising SIGXFSZ,
// whose default action kills the process (the runtime happens to ignore
// it today; this does not rely on that).
func applyRuntime(p Policy, rep *Report) {
	if p.GoMaxProcs > 0 {
		runtime.GOMAXPROCS(p.GoMaxProcs)
	}
	if p.GoMemLimitBytes > 0 {
		debug.SetMemoryLimit(p.GoMemLimitBytes)
	}
	signal.Ignore(syscall.SIGXFSZ)
	rep.GoMaxProcs = runtime.GOMAXPROCS(0)
	rep.GoMemLimitBytes = debug.SetMemoryLimit(-1)
	rep.SIGXFSZIgnored = true
}

// applyLandlock checks the kernel's ABI against what p requires, then
// enforces one ruleset. It reports whether TCP rules are in force.
func (s system) applyLandlock(p Policy, abi int, rep *Report) (bool, error) {
	needFS := fsABI(p.Landlock.MinABI)
	fsOK := abi >= needFS
	reason := fmt.Sprintf("filesystem rules need Landlock ABI >= %d (min_abi %d)", needFS, p.Landlock.MinABI)
	if ue := rep.check(p, LayerLandlockFS, fsOK, abi, reason); ue != nil {
		return false, ue
	}
	netOK := abi >= 4
	if ue := rep.check(p, LayerLandlockNet, netOK, abi, "TCP connect/bind rules need Landlock ABI >= 4"); ue != nil {
		return false, ue
	}
	if abi < 1 {
		return false, nil // only reached when both layers accept best effort
	}
	plan := planLandlock(p.Landlock, abi, netOK)
	rep.MissingPaths = plan.missing
	if err := s.restrict(plan); err != nil {
		return false, fmt.Errorf("enforcing the Landlock ruleset: %w", err)
	}
	rep.EnforcedLandlockABI = min(abi, maxABI)
	rep.enforced(LayerLandlockFS, fmt.Sprintf("ABI %d ruleset", rep.EnforcedLandlockABI))
	if netOK {
		rep.enforced(LayerLandlockNet, fmt.Sprintf("connect %v, bind %v", p.Landlock.ConnectTCP, p.Landlock.BindTCP))
	}
	return netOK, nil
}

// fsABIs are the ABIs that added filesystem or scope rights: 2 refer, 3
// truncate, 5 ioctl on devices, 6 abstract-socket and signal scopes, 9
// pathname Unix sockets. ABI 4 added only TCP rules (landlock-net), 7
// logging, 8 thread sync, 10 UDP, 11 nothing new.
var fsABIs = []int{1, 2, 3, 5, 6, 9}

// fsABI is the ABI landlock-fs needs for a policy's min_abi: the newest
// filesystem step at or below it. So min_abi 4 asks ABI 3 of landlock-fs
// and ABI 4 of landlock-net, and a kernel with ABI 3 degrades only the
// latter when it is best effort.
func fsABI(minABI int) int {
	need := 1
	for _, v := range fsABIs {
		if v <= minABI {
			need = v
		}
	}
	return need
}

// applySeccomp installs one filter carrying every seccomp layer p asks
// for. MPTCP sockets are refused whenever Landlock's TCP rules are on:
// Landlock does not see MPTCP, and Go listeners use it by default.
func (s system) applySeccomp(p Policy, netOn bool, rep *Report) error {
	spec := filterSpec{baseline: true, noSpawn: p.NoSpawn, noUnix: p.DenyUnixSockets, noMPTCP: netOn,
		noListen: p.NoListen, noUDP: p.NoUDP, noNetlink: p.NoNetlink}
	layers := []string{LayerSyscallDeny}
	for _, l := range p.SeccompLayers() {
		if l.On {
			layers = append(layers, l.Name)
		}
	}
	loadErr := s.seccomp(spec.program())
	rep.Kernel.Seccomp = SeccompLoaded
	if loadErr != nil {
		rep.Kernel.Seccomp = "refused: " + loadErr.Error()
	}
	for _, layer := range layers {
		if ue := rep.check(p, layer, loadErr == nil, rep.KernelLandlockABI, "installing the seccomp filter failed"); ue != nil {
			ue.Err = loadErr
			return ue
		}
		if loadErr == nil {
			rep.enforced(layer, "seccomp filter, all threads (TSYNC)")
		}
	}
	if loadErr != nil && netOn {
		// The TCP rules stand, but MPTCP listeners escape them.
		if ue := rep.check(p, LayerLandlockNet, false, rep.KernelLandlockABI, "MPTCP sockets could not be refused"); ue != nil {
			ue.Err = loadErr
			return ue
		}
	}
	if loadErr == nil {
		rep.DeniedSyscalls = spec.deniedNames()
	}
	rep.notRequested(p)
	return nil
}

// check records layer as required or best effort. When the kernel cannot
// enforce it (ok false), a required layer yields an *UnavailableError and
// a best-effort one a degradation.
func (r *Report) check(p Policy, layer string, ok bool, abi int, reason string) *UnavailableError {
	required := !p.AcceptsBestEffort(layer)
	r.upsert(LayerStatus{Name: layer, Required: required})
	if ok {
		return nil
	}
	if required {
		return &UnavailableError{Layer: layer, KernelABI: abi, Reason: reason}
	}
	msg := fmt.Sprintf("%s: not fully enforced (kernel Landlock ABI %d): %s; accepted as best effort", layer, abi, reason)
	r.Degradations = append(r.Degradations, msg)
	r.upsert(LayerStatus{Name: layer, Required: false, Detail: msg})
	return nil
}

func (r *Report) enforced(layer, detail string) {
	for i := range r.Layers {
		if r.Layers[i].Name == layer {
			r.Layers[i].Enforced = true
			if r.Layers[i].Detail == "" {
				r.Layers[i].Detail = detail
			}
		}
	}
}

// upsert replaces the status of l.Name, keeping the Enforced mark and the
// first detail, or appends it.
func (r *Report) upsert(l LayerStatus) {
	for i := range r.Layers {
		if r.Layers[i].Name == l.Name {
			l.Enforced = l.Enforced || r.Layers[i].Enforced
			if l.Detail == "" {
				l.Detail = r.Layers[i].Detail
			}
			r.Layers[i] = l
			return
		}
	}
	r.Layers = append(r.Layers, l)
}

// notRequested lists the seccomp layers the policy turned off, so the
// report shows every layer and why it is off.
func (r *Report) notRequested(p Policy) {
	for _, l := range p.SeccompLayers() {
		switch {
		case l.On:
		case l.Name == LayerNoSpawn:
			r.upsert(LayerStatus{Name: l.Name, Detail: "not requested: the spec grants process spawning (shell_access)"})
		default:
			r.upsert(LayerStatus{Name: l.Name, Detail: "not requested by the policy"})
		}
	}
}
