//go:build kube

package netguard

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// TestInstallInNetns installs the rules for real in a throwaway network
// namespace joined by a veth pair to a second throwaway namespace, and
// checks what passes. Nothing leaves the two namespaces: they have no
// other interface and no route, and the addresses are from the
// documentation ranges (192.0.2.0/24, 2001:db8::/32).
func TestInstallInNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces and nftables): run as root, e.g. sudo -E go test -tags kube ./internal/kube/netguard/")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("needs the ip command (apt-get install iproute2)")
	}
	a, b := fmt.Sprintf("mcpsng-%d-a", os.Getpid()), fmt.Sprintf("mcpsng-%d-b", os.Getpid())
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", a).Run()
		_ = exec.Command("ip", "netns", "del", b).Run()
	})
	for _, args := range [][]string{
		{"netns", "add", a}, {"netns", "add", b},
		{"link", "add", "vng-a", "netns", a, "type", "veth", "peer", "name", "vng-b", "netns", b},
		{"-n", a, "addr", "add", "192.0.2.1/30", "dev", "vng-a"},
		{"-n", b, "addr", "add", "192.0.2.2/30", "dev", "vng-b"},
		{"-n", a, "addr", "add", "2001:db8::1/64", "dev", "vng-a", "nodad"},
		{"-n", b, "addr", "add", "2001:db8::2/64", "dev", "vng-b", "nodad"},
		{"-n", a, "link", "set", "vng-a", "up"}, {"-n", b, "link", "set", "vng-b", "up"},
		{"-n", a, "link", "set", "lo", "up"}, {"-n", b, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	nsA, nsB := "/run/netns/"+a, "/run/netns/"+b
	for _, addr := range []string{"192.0.2.2:8000", "192.0.2.2:9000", "[2001:db8::2]:8000"} {
		serve(t, nsB, addr)
	}
	serve(t, nsA, "127.0.0.1:7000")
	serve(t, nsA, "192.0.2.1:7001")

	// Before the rules, everything connects: the checks below can fail.
	// The veth link and IPv6 neighbour discovery take a moment to come up.
	for _, d := range []struct{ ns, addr string }{
		{nsA, "192.0.2.2:8000"}, {nsA, "192.0.2.2:9000"}, {nsA, "[2001:db8::2]:8000"}, {nsB, "192.0.2.1:7001"},
	} {
		var err error
		for try := 0; try < 10; try++ {
			if err = dialIn(t, d.ns, d.addr); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("control: before the rules %s is unreachable from %s: %v", d.addr, d.ns, err)
		}
	}

	fd, err := unix.Open(nsA, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	c := Config{Allow: []Dest{netip.MustParseAddrPort("192.0.2.2:8000")}}
	if err := Install(c, nftables.WithNetNSFd(fd)); err != nil {
		t.Fatalf("Install: %v", err)
	}
	// Installing twice leaves one table with the same rules.
	if err := Install(c, nftables.WithNetNSFd(fd)); err != nil {
		t.Fatalf("second Install: %v", err)
	}

	for _, tt := range []struct {
		ns, addr string
		ok       bool
	}{
		{nsA, "192.0.2.2:8000", true},      // the allowed destination
		{nsA, "127.0.0.1:7000", true},      // loopback
		{nsA, "192.0.2.2:9000", false},     // another port of the same address
		{nsA, "[2001:db8::2]:8000", false}, // IPv6
		{nsB, "192.0.2.1:7001", false},     // inbound
	} {
		err := dialIn(t, tt.ns, tt.addr)
		if tt.ok && err != nil {
			t.Errorf("%s: %s refused, want allowed: %v", tt.ns, tt.addr, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s: %s connected, want dropped", tt.ns, tt.addr)
		}
	}
}

// inNetns runs f on a thread that has joined the namespace at path.
func inNetns(t *testing.T, path string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			t.Errorf("setns %s: %v", path, err)
			return
		}
		f()
	}()
	<-done
}

// serve listens on addr in the namespace and answers "ok" to each
// connection.
func serve(t *testing.T, ns, addr string) {
	t.Helper()
	var l net.Listener
	inNetns(t, ns, func() {
		var err error
		if l, err = net.Listen("tcp", addr); err != nil {
			t.Errorf("listening on %s in %s: %v", addr, ns, err)
		}
	})
	if l == nil {
		t.FailNow()
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("ok"))
			c.Close()
		}
	}()
}

// dialIn connects to addr from the namespace and reads the answer, so
// the replies (input, established) are checked too.
func dialIn(t *testing.T, ns, addr string) error {
	var err error
	inNetns(t, ns, func() {
		var c net.Conn
		c, err = net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		var b []byte
		b, err = io.ReadAll(c)
		if err == nil && string(b) != "ok" {
			err = fmt.Errorf("answer %q, want ok", b)
		}
	})
	return err
}
