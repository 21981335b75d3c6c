//go:build linux

package probe

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReachOutcome(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"connected", nil, Allowed},
		{"reset or port unreachable", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", unix.ECONNREFUSED)}, Allowed},
		{"no neighbour", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", unix.EHOSTUNREACH)}, Denied},
		{"no route", unix.ENETUNREACH, Denied},
		{"landlock", os.NewSyscallError("connect", unix.EACCES), Denied},
		{"seccomp", os.NewSyscallError("socket", unix.EPERM), Denied},
		{"silence on a raw read", unix.EAGAIN, Denied},
		{"deadline", os.ErrDeadlineExceeded, Denied},
		{"dial timeout", context.DeadlineExceeded, Denied},
		{"something else", unix.EBADF, Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reachOutcome(tt.err); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReachOutcomeDialTimeout uses a real dial timeout error, whose type is
// the net package's own.
func TestReachOutcomeDialTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:1")
	if err == nil {
		t.Fatal("dial with a cancelled context succeeded")
	}
	if got := reachOutcome(fmt.Errorf("wrapped: %w", err)); got == Allowed {
		t.Errorf("a cancelled dial is %v", got)
	}
}

func TestCombine(t *testing.T) {
	tests := []struct {
		name string
		as   []attempt
		want Outcome
	}{
		{"all silent", []attempt{{"a", Denied, "x"}, {"b", Denied, "y"}}, Denied},
		{"one answers", []attempt{{"a", Denied, "x"}, {"b", Allowed, "y"}, {"c", Error, "z"}}, Allowed},
		{"one unmeasured", []attempt{{"a", Denied, "x"}, {"b", Error, "y"}}, Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := combine("test", tt.as); got.Outcome != tt.want {
				t.Errorf("got %v (%s), want %v", got.Outcome, got.Evidence, tt.want)
			}
		})
	}
}

func TestJudgeFastOpen(t *testing.T) {
	eacces, eperm, enotsup := os.NewSyscallError("connect", unix.EACCES), unix.EPERM, unix.EOPNOTSUPP
	tests := []struct {
		name                   string
		baseline, opt, sendErr error
		want                   Outcome
	}{
		{"sysctl off and connect refused", eacces, enotsup, enotsup, Denied},
		{"seccomp refuses both", eacces, eperm, eperm, Denied},
		{"TCP_FASTOPEN_CONNECT accepted", eacces, nil, eperm, Allowed},
		{"TCP_FASTOPEN_CONNECT accepted without a connect rule", unix.ECONNREFUSED, nil, nil, Allowed},
		{"SYN sent past Landlock", eacces, eperm, unix.EINPROGRESS, Allowed},
		{"reset past Landlock", eacces, enotsup, unix.ECONNREFUSED, Allowed},
		{"sent, but connect is not refused either", unix.ECONNREFUSED, eperm, unix.EINPROGRESS, Error},
		{"refused by the sandbox without a connect rule", unix.ECONNREFUSED, eperm, eperm, Denied},
		{"unexpected", eacces, eperm, unix.EBADF, Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := judgeFastOpen(tt.baseline, tt.opt, tt.sendErr)
			if got != tt.want {
				t.Errorf("got %v (%s), want %v", got, note, tt.want)
			}
		})
	}
}

func TestForeignMounts(t *testing.T) {
	mi := []byte(`22 21 0:20 / /tmp rw,nosuid - tmpfs tmpfs rw
23 21 8:1 /srv/runs/run-1/agent /sandbox-output rw - ext4 /dev/sda1 rw
24 21 8:1 /var/lib/docker/containers/abc/hosts /etc/hosts rw - ext4 /dev/sda1 rw
25 21 0:5 /null /proc/kcore rw - devtmpfs udev rw
`)
	if got := foreignMounts(parseMountinfo(mi), "/sandbox-output"); len(got) != 0 {
		t.Errorf("the agent's own mounts: got %v, want nothing foreign", got)
	}
	tests := []struct{ name, line string }{
		{"a sibling folder of the run directory", "30 21 8:1 /srv/runs/run-1/probe-extra /data rw - ext4 /dev/sda1 rw"},
		{"another role's folder", "30 21 8:1 /srv/other/gateway /x rw - ext4 /dev/sda1 rw"},
		{"a mount under the output directory", "30 23 0:44 / /sandbox-output/logs rw - tmpfs tmpfs rw"},
		{"an escaped name", `30 21 8:1 /srv/runs/run-1/side\040car /y rw - ext4 /dev/sda1 rw`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := foreignMounts(parseMountinfo(append(append([]byte{}, mi...), tt.line+"\n"...)), "/sandbox-output")
			if len(got) != 1 {
				t.Errorf("got %v, want one foreign mount", got)
			}
		})
	}
}

func TestForeignEntries(t *testing.T) {
	dir := t.TempDir()
	if got := foreignEntries(dir); len(got) != 0 {
		t.Fatalf("empty output directory: %v", got)
	}
	if err := os.MkdirAll(filepath.Join(dir, "gateway"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "egress-decisions.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := foreignEntries(dir)
	if len(got) != 2 || !strings.Contains(got[0], "writable") {
		t.Errorf("got %v, want the gateway folder (writable) and the decision log", got)
	}
	left, _ := os.ReadDir(filepath.Join(dir, "gateway"))
	if len(left) != 0 {
		t.Errorf("the write check left %v behind", left)
	}
}

// TestWaysOutCanFail runs the probes that need no network target on this
// unhardened test process: each must see the way out open, so none can pass
// vacuously (the e2e negative control does the same in a container).
func TestWaysOutCanFail(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		run  func() Result
	}{
		{"listen without bind", listenUnbound},
		{"UDP socket", func() Result { return openSockets(udpSockets) }},
		{"netlink socket", func() Result { return openSockets(netlinkSockets) }},
		{"setuid bit", func() Result { return setuidBits(dir) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := tt.run(); r.Outcome != Allowed {
				t.Errorf("got %v (%s: %s), want Allowed in an unhardened process", r.Outcome, r.Summary, r.Evidence)
			}
		})
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the setuid probe left %v behind", left)
	}
}

// closedPort returns a loopback port nothing listens on (it was just
// released), so the tests do not depend on what the machine runs.
func closedPort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestHostTCPLoopback aims the TCP probe at a loopback "host address": a
// listener is reached (Allowed) and a closed port's reset is Allowed too.
func TestHostTCPLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c := DefaultContext()
	c.HostAddresses = []string{"127.0.0.1"}
	c.GatewayURL = fmt.Sprintf("http://egress-gateway:%d", l.Addr().(*net.TCPAddr).Port)
	c.SidecarURL = fmt.Sprintf("http://mcp-sidecar:%d/mcp", closedPort(t, "tcp"))
	r := hostTCP(context.Background(), c)
	if r.Outcome != Allowed || !strings.Contains(r.Evidence, "connected") || !strings.Contains(r.Evidence, "reset") {
		t.Errorf("got %v (%s), want a connection and a reset", r.Outcome, r.Evidence)
	}
}

// TestUDPQueryLoopback: an answer and an ICMP port unreachable (a closed
// port) are both the host answering.
func TestUDPQueryLoopback(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		if n, from, err := pc.ReadFrom(buf); err == nil {
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	for _, target := range []string{pc.LocalAddr().String(), fmt.Sprintf("127.0.0.1:%d", closedPort(t, "udp"))} {
		if o, note := udpQuery(context.Background(), target); o != Allowed {
			t.Errorf("%s: got %v (%s), want Allowed", target, o, note)
		}
	}
}
