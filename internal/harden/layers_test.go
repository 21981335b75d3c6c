//go:build linux

package harden

import (
	"fmt"
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
		// Negative: the baseline's argument rules (issue 12).
		check("TCP Fast Open to an unlisted port", ActTFOSendto, f.connectNo, OutcomeDenied),
		check("setsockopt TCP_FASTOPEN_CONNECT", ActTFOConnect, "", OutcomeDenied),
		check("chmod u+s", ActChmodSetuid, f.rwDir, OutcomeDenied),
		check("chmod g+s", ActChmodSetgid, f.rwDir, OutcomeDenied),
		check("fchmod u+s", ActFchmodSetuid, f.rwDir, OutcomeDenied),
		check("fchmodat2 u+s", ActFchmodat2Setuid, f.rwDir, OutcomeDenied),
		check("create a setuid file", ActCreateSetuid, f.rwDir, OutcomeDenied),
		check("mknod a setuid file", ActMknodSetuid, f.rwDir, OutcomeDenied),
		check("raw socket", ActRawSocket, "", OutcomeDenied),
		check("packet socket", ActPacketSocket, "", OutcomeDenied),
		check("ICMP ping socket", ActPingSocket, "", OutcomeDenied),
		// Positive: this policy serves and keeps UDP and netlink.
		check("UDP socket (not refused by this policy)", ActUDPSocket, "", OutcomeOK),
		check("listen without bind (not refused by this policy)", ActListenUnbound, "", OutcomeOK),
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
// needs CAP_SYS_ADMIN, raw and packet sockets CAP_NET_RAW; io_uring may
// be disabled by sysctl, ping sockets are limited to ping_group_range,
// TCP Fast Open by net.ipv4.tcp_fastopen).
func unhardenedOutcome(action string) string {
	root := os.Geteuid() == 0
	switch action {
	case ActRawSocket, ActPacketSocket:
		if !root {
			return OutcomeDenied
		}
	case ActPingSocket:
		if !pingAllowed() {
			return OutcomeDenied
		}
	case ActTFOSendto, ActTFOConnect:
		if !tfoClientEnabled() {
			return OutcomeError // EOPNOTSUPP
		}
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
				if got := out.Report.Kernel.Seccomp; tt.mode == "no-seccomp" && !strings.HasPrefix(got, "refused: ") {
					t.Errorf("report's seccomp %q, want the refusal", got)
				}
				return
			}
			if out.ApplyError != "" {
				t.Fatalf("apply: %s", out.ApplyError)
			}
			if out.Report.Refused != nil || out.Report.Kernel.Seccomp != SeccompLoaded {
				t.Errorf("report: refused %+v, seccomp %q; want no refusal and the filter loaded", out.Report.Refused, out.Report.Kernel.Seccomp)
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
	if r := out.Report.Refused; r == nil || r.Layer != layer || r.KernelABI != out.Unavailable.KernelABI || r.Reason == "" {
		t.Errorf("report's refusal %+v, want layer %s, kernel ABI %d and a reason", r, layer, out.Unavailable.KernelABI)
	}
	if out.Report.Kernel.Release == "" {
		t.Error("report does not carry the kernel's release")
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

// pingAllowed reports whether our group may open ICMP datagram sockets.
func pingAllowed() bool {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ping_group_range")
	if err != nil {
		return false
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return false
	}
	gid := os.Getegid()
	return lo <= gid && gid <= hi
}

// tfoClientEnabled reports whether net.ipv4.tcp_fastopen has the client
// bit (1) set.
func tfoClientEnabled() bool {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_fastopen")
	if err != nil {
		return false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && v&1 != 0
}

// nonServing is f.policy for a role like the agent: it serves nothing,
// needs no UDP and no netlink, and reads /etc/hosts.
func nonServing(f fixture) Policy {
	p := f.policy
	p.NoListen, p.NoUDP, p.NoNetlink = true, true, true
	p.Landlock.BindTCP = []uint16{}
	p.Landlock.ReadOnlyFiles = append(p.Landlock.ReadOnlyFiles, "/etc/hosts")
	return p
}

func nonServingChecks(f fixture) []Check {
	return []Check{
		check("connect allowed port", ActConnect, f.connectOK, OutcomeOK),
		check("name in /etc/hosts resolves without UDP", ActLookup, "localhost", OutcomeOK),
		check("listen without bind", ActListenUnbound, "", OutcomeDenied),
		check("listen on an unlisted port", ActBind, f.bindNo, OutcomeDenied),
		check("UDP socket", ActUDPSocket, "", OutcomeDenied),
		check("ICMP ping socket", ActPingSocket, "", OutcomeDenied),
		check("netlink socket", ActNetlink, "", OutcomeDenied),
	}
}

// TestNonServingRole: a role that serves nothing cannot listen, even
// without bind (the kernel would pick a port Landlock never sees), gets
// no UDP, ICMP or netlink socket, and still resolves a name from
// /etc/hosts, which needs none of them.
func TestNonServingRole(t *testing.T) {
	f := newFixture(t)
	p := nonServing(f)
	checks := nonServingChecks(f)
	out := runChild(t, "host", p, nil, checks...)
	if out.ApplyError != "" {
		t.Fatalf("apply: %s", out.ApplyError)
	}
	assertResults(t, out.Results, checks)
	for _, name := range []string{LayerNoListen, LayerNoUDP, LayerNoNetlink} {
		i := slices.IndexFunc(out.Report.Layers, func(l LayerStatus) bool { return l.Name == name })
		if i < 0 || !out.Report.Layers[i].Enforced || !out.Report.Layers[i].Required {
			t.Errorf("layer %s not required and enforced: %+v", name, out.Report.Layers)
		}
	}
}

// TestNonServingControl: the same attempts work with nothing applied
// (except where the kernel refuses them by itself), so the refusals above
// are the filter's doing. The name lookup is left out: unhardened it
// might send a DNS query off this machine.
func TestNonServingControl(t *testing.T) {
	f := newFixture(t)
	checks := slices.DeleteFunc(nonServingChecks(f), func(c Check) bool { return c.Action == ActLookup })
	for i := range checks {
		if checks[i].Want == OutcomeDenied {
			checks[i].Want = unhardenedOutcome(checks[i].Action)
		}
	}
	out := runChild(t, "none", nonServing(f), nil, checks...)
	assertResults(t, out.Results, checks)
}

// TestTFOGap shows what the seccomp rule is for: with Landlock's TCP rules
// alone, some kernels let TCP Fast Open (sendto with MSG_FASTOPEN) connect
// to a port that connect(2) is refused (landlock-lsm/linux issue 41);
// later kernels refuse it. The test detects which kind this kernel is and
// logs it, and asserts only what our layers guarantee whatever the
// kernel: Landlock refuses connect to the unlisted port, and with the
// full policy (seccomp's TCP Fast Open rule) the Fast Open attempt is
// refused too. It needs the client side of TCP Fast Open, which is on by
// default.
func TestTFOGap(t *testing.T) {
	if !tfoClientEnabled() {
		t.Fatal("net.ipv4.tcp_fastopen has no client bit on this host: the gap cannot be looked for")
	}
	f := newFixture(t)
	tfo := check("TCP Fast Open to the same port", ActTFOSendto, f.connectNo, OutcomeDenied)
	refused := check("connect unlisted port", ActConnect, f.connectNo, OutcomeDenied)

	t.Run("landlock-only", func(t *testing.T) {
		out := runChild(t, "landlock-only", f.policy, nil, refused, tfo)
		if out.ApplyError != "" {
			t.Fatalf("apply: %s", out.ApplyError)
		}
		assertResults(t, out.Results[:1], []Check{refused})
		switch got := out.Results[1]; got.Got {
		case OutcomeOK:
			t.Logf("this kernel has the gap: Landlock alone lets TCP Fast Open reach %s (the seccomp rule closes it)", f.connectNo)
		case OutcomeDenied:
			t.Logf("this kernel has no gap: Landlock alone refuses TCP Fast Open to %s", f.connectNo)
		default:
			t.Errorf("TCP Fast Open under Landlock alone: got %s (%s), want %s or %s: the attempt did not test the gap", got.Got, got.Error, OutcomeOK, OutcomeDenied)
		}
	})
	t.Run("host", func(t *testing.T) {
		checks := []Check{refused, tfo}
		out := runChild(t, "host", f.policy, nil, checks...)
		if out.ApplyError != "" {
			t.Fatalf("apply: %s", out.ApplyError)
		}
		assertResults(t, out.Results, checks)
	})
}
