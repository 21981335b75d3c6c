//go:build linux

package harden

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// check builds a Check.
func check(name, action, arg, want string) Check {
	return Check{Name: name, Action: action, Arg: arg, Want: want}
}

// attempts are every action the layers must allow or refuse, with the
// outcome under f.policy (NoSpawn and DenyUnixSockets on).
func attempts(f fixture) []Check {
	self := f.policy.Landlock.ExecFiles[0]
	return []Check{
		// Positive: what a role needs still works.
		check("read allowed file", ActRead, filepath.Join(f.roDir, "ro.txt"), OutcomeOK),
		check("write in writable dir", ActWrite, filepath.Join(f.rwDir, "out.txt"), OutcomeOK),
		check("connect allowed port", ActConnect, f.connectOK, OutcomeOK),
		check("bind allowed port", ActBind, f.bindOK, OutcomeOK),
		check("write past fsize limit", ActFsize, filepath.Join(f.rwDir, "big"), OutcomeEFBIG),
		// Negative: Landlock filesystem.
		check("write outside allowed paths", ActWrite, filepath.Join(f.roDir, "new.txt"), OutcomeDenied),
		check("write in unlisted dir", ActWrite, filepath.Join(f.deniedDir, "new.txt"), OutcomeDenied),
		check("read outside allowed paths", ActRead, filepath.Join(f.deniedDir, "secret.txt"), OutcomeDenied),
		// Negative: no-spawn (seccomp refuses before Landlock is asked).
		check("execve of an allowed program", ActExec, self, OutcomeDenied),
		check("execute a file written to tmp", ActWriteExec, f.rwDir, OutcomeDenied),
		// Negative: Landlock TCP, with Go's default MPTCP listener.
		check("connect unlisted port", ActConnect, f.connectNo, OutcomeDenied),
		check("bind unlisted port", ActBind, f.bindNo, OutcomeDenied),
		// Negative: no-unix and the syscall baseline.
		check("unix socket", ActUnixSocket, "", OutcomeDenied),
		check("socketpair", ActSocketpair, "", OutcomeDenied),
		check("ptrace", ActPtrace, "", OutcomeDenied),
		check("unshare user namespace", ActUnshareUser, "", OutcomeDenied),
		check("mount", ActMount, "", OutcomeDenied),
		check("keyctl", ActKeyctl, "", OutcomeDenied),
		check("io_uring_setup", ActIOUring, "", OutcomeDenied),
	}
}

func assertResults(t *testing.T, results []CheckResult, want []Check) {
	t.Helper()
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d", len(results), len(want))
	}
	for _, r := range results {
		t.Run(r.Name, func(t *testing.T) {
			if !r.Pass {
				t.Errorf("%s %s: got %s (%s), want %s", r.Action, r.Arg, r.Got, r.Error, r.Want)
			}
		})
	}
}

// TestLayersHold applies the full policy in a child and attempts every
// action: each layer's positive case works, each negative case is refused.
func TestLayersHold(t *testing.T) {
	f := newFixture(t)
	checks := attempts(f)
	out := runChild(t, "host", f.policy, nil, checks...)
	if out.ApplyError != "" {
		t.Fatalf("apply: %s", out.ApplyError)
	}
	assertResults(t, out.Results, checks)
	for _, l := range out.Report.Layers {
		if l.Required && !l.Enforced {
			t.Errorf("layer %s required but not enforced: %+v", l.Name, l)
		}
	}
	if len(out.Report.Degradations) != 0 {
		t.Errorf("degradations on a full kernel: %v", out.Report.Degradations)
	}
}

// TestControlUnhardened runs the same attempts with nothing applied: every
// refused action succeeds there (as root; see unhardenedOutcome for an
// unprivileged user), so the refusals above are the layers' doing and the
// test can fail. Landlock binds root too.
func TestControlUnhardened(t *testing.T) {
	f := newFixture(t)
	checks := attempts(f)
	for i := range checks {
		if checks[i].Want == OutcomeDenied {
			checks[i].Want = unhardenedOutcome(checks[i].Action)
		}
	}
	out := runChild(t, "none", f.policy, nil, checks...)
	assertResults(t, out.Results, checks)
}

// unhardenedOutcome is what an action gives with no layer applied: it
// works, except where the kernel itself refuses the test's user (mount
// needs CAP_SYS_ADMIN; io_uring may be disabled by sysctl).
func unhardenedOutcome(action string) string {
	root := os.Geteuid() == 0
	switch action {
	case ActMount:
		if !root {
			return OutcomeDenied
		}
	case ActIOUring:
		b, _ := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
		switch strings.TrimSpace(string(b)) {
		case "2":
			return OutcomeDenied
		case "1":
			if !root {
				return OutcomeDenied
			}
		}
	}
	return OutcomeOK
}

// TestBindRulesAndMPTCP: Go listeners try Multipath TCP first, which
// Landlock's bind rules do not see. With the seccomp MPTCP refusal a bind
// outside the policy fails both by default and with GODEBUG=multipathtcp=0;
// without it (landlock-only) the default listener escapes wherever the
// kernel has MPTCP enabled.
func TestBindRulesAndMPTCP(t *testing.T) {
	f := newFixture(t)
	gapOutcome := OutcomeDenied
	if mptcpEnabled() {
		gapOutcome = OutcomeOK
	}
	tests := []struct {
		name, mode, godebug, want string
	}{
		{"full policy, Go default", "host", "", OutcomeDenied},
		{"full policy, multipathtcp=0", "host", "multipathtcp=0", OutcomeDenied},
		{"landlock only, multipathtcp=0", "landlock-only", "multipathtcp=0", OutcomeDenied},
		{"landlock only, Go default (the gap)", "landlock-only", "", gapOutcome},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var env []string
			if tt.godebug != "" {
				env = []string{"GODEBUG=" + tt.godebug}
			}
			c := check("bind unlisted port", ActBind, f.bindNo, tt.want)
			out := runChild(t, tt.mode, f.policy, env, c)
			if out.ApplyError != "" {
				t.Fatalf("apply: %s", out.ApplyError)
			}
			assertResults(t, out.Results, []Check{c})
		})
	}
}

// TestShellAccess: with NoSpawn off the allowed program runs, and a file
// written to the writable dir still cannot run (Landlock: no EXECUTE there).
func TestShellAccess(t *testing.T) {
	f := newFixture(t)
	f.policy.NoSpawn = false
	checks := []Check{
		check("exec allowed program", ActExec, f.policy.Landlock.ExecFiles[0], OutcomeOK),
		check("execute a file written to tmp", ActWriteExec, f.rwDir, OutcomeDenied),
	}
	out := runChild(t, "host", f.policy, nil, checks...)
	if out.ApplyError != "" {
		t.Fatalf("apply: %s", out.ApplyError)
	}
	assertResults(t, out.Results, checks)
	if i := slices.IndexFunc(out.Report.Layers, func(l LayerStatus) bool { return l.Name == LayerNoSpawn }); i < 0 || out.Report.Layers[i].Enforced {
		t.Errorf("no-spawn layer should be listed and off: %+v", out.Report.Layers)
	}
}

// TestFailClosed: when the kernel cannot enforce a required layer the
// child gets an *UnavailableError naming the layer and ABI and runs no
// check; a best-effort layer is reported as a degradation instead.
func TestFailClosed(t *testing.T) {
	f := newFixture(t)
	probe := check("read outside allowed paths", ActRead, filepath.Join(f.deniedDir, "secret.txt"), OutcomeDenied)
	tests := []struct {
		name       string
		mode       string
		edit       func(*Policy)
		wantLayer  string // "" when apply must succeed
		wantABI    int
		wantDegrad int
		want       string // outcome of probe when apply succeeds
	}{
		{"no Landlock at all", "abi0", func(*Policy) {}, LayerLandlockFS, 0, 0, ""},
		{"ABI without network rules", "abi3", func(*Policy) {}, LayerLandlockNet, 3, 0, ""},
		{"MinABI above the kernel's", "host", func(p *Policy) { p.Landlock.MinABI = maxABI }, LayerLandlockFS, -1, 0, ""},
		{"seccomp refused", "no-seccomp", func(*Policy) {}, LayerSyscallDeny, -1, 0, ""},
		{"seccomp refused, baseline best effort", "no-seccomp", func(p *Policy) { p.BestEffort = []string{LayerSyscallDeny} }, LayerNoSpawn, -1, 0, ""},
		{"net best effort on ABI 3", "abi3", func(p *Policy) { p.BestEffort = []string{LayerLandlockNet} }, "", 0, 1, OutcomeDenied},
		{"min_abi 4, net best effort on ABI 3 (the spec's choice)", "abi3", func(p *Policy) {
			p.Landlock.MinABI = 4
			p.BestEffort = []string{LayerLandlockNet}
		}, "", 0, 1, OutcomeDenied},
		{"min_abi 5 on ABI 3", "abi3", func(p *Policy) {
			p.Landlock.MinABI = 5
			p.BestEffort = []string{LayerLandlockNet}
		}, LayerLandlockFS, 3, 0, ""},
		{"everything best effort without Landlock", "abi0", func(p *Policy) { p.BestEffort = []string{LayerLandlockFS, LayerLandlockNet} }, "", 0, 2, OutcomeOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := f.policy
			p.BestEffort = nil
			tt.edit(&p)
			c := probe
			c.Want = tt.want
			out := runChild(t, tt.mode, p, nil, c)
			if tt.wantLayer != "" {
				assertUnavailable(t, out, tt.wantLayer, tt.wantABI)
				return
			}
			if out.ApplyError != "" {
				t.Fatalf("apply: %s", out.ApplyError)
			}
			if got := len(out.Report.Degradations); got != tt.wantDegrad {
				t.Errorf("got %d degradations %v, want %d", got, out.Report.Degradations, tt.wantDegrad)
			}
			assertResults(t, out.Results, []Check{c})
		})
	}
}

func assertUnavailable(t *testing.T, out childOutput, layer string, abi int) {
	t.Helper()
	if out.Unavailable == nil {
		t.Fatalf("apply error %q, want *UnavailableError for %s", out.ApplyError, layer)
	}
	if out.Unavailable.Layer != layer {
		t.Errorf("got layer %s, want %s (%s)", out.Unavailable.Layer, layer, out.ApplyError)
	}
	if abi >= 0 && out.Unavailable.KernelABI != abi {
		t.Errorf("got kernel ABI %d, want %d", out.Unavailable.KernelABI, abi)
	}
	if len(out.Results) != 0 {
		t.Errorf("checks ran after a failed apply: %+v", out.Results)
	}
	if out.Report.Error == "" {
		t.Error("report does not carry the error")
	}
}

// TestAllThreads: the Go runtime is multi-threaded, so every layer must
// hold on threads that existed before Apply, not just the one that called
// it. Eight threads locked before Apply each attempt the forbidden actions.
func TestAllThreads(t *testing.T) {
	const threads = 8
	f := newFixture(t)
	checks := []Check{
		check("read outside allowed paths", ActRead, filepath.Join(f.deniedDir, "secret.txt"), OutcomeDenied),
		check("write outside allowed paths", ActWrite, filepath.Join(f.roDir, "new.txt"), OutcomeDenied),
		check("execve", ActExec, f.policy.Landlock.ExecFiles[0], OutcomeDenied),
		check("unix socket", ActUnixSocket, "", OutcomeDenied),
		check("connect unlisted port", ActConnect, f.connectNo, OutcomeDenied),
		check("ptrace", ActPtrace, "", OutcomeDenied),
	}
	out := runChild(t, "host", f.policy, []string{envThreads + "=" + strconv.Itoa(threads)}, checks...)
	if out.ApplyError != "" {
		t.Fatalf("apply: %s", out.ApplyError)
	}
	if got := len(slices.Compact(slices.Sorted(slices.Values(out.ThreadIDs)))); got != threads {
		t.Fatalf("checks ran on %d distinct threads %v, want %d", got, out.ThreadIDs, threads)
	}
	for i, r := range out.Results {
		if !r.Pass {
			t.Errorf("thread %d: %s: got %s (%s), want %s", out.ThreadIDs[i/len(checks)], r.Name, r.Got, r.Error, r.Want)
		}
	}
	if len(out.Results) != threads*len(checks) {
		t.Errorf("got %d results, want %d", len(out.Results), threads*len(checks))
	}
}
