//go:build docker

package e2e

// Local processes that hold the process ids an engine elsewhere will
// report (issue 32): they live in a network namespace of their own, with
// default routes and listeners on the roles' ports, so that a host that
// took the engine's pid for its own would be seen entering, dialing or
// changing something there.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envVictims makes TestEngineVictimHelper the holder: "DIR,FIRST,COUNT,PORT,PORT...".
const envVictims = "MCPSIDECAR_E2E_VICTIMS"

// The victims' namespace: a veth pair (this kernel has no dummy
// interfaces), without link-local addresses (whose routes would come and
// go with duplicate address detection), with documentation addresses and
// a default route each way.
var victimNetSetup = [][]string{
	{"link", "set", "lo", "up"},
	{"link", "add", "mcpsv0", "type", "veth", "peer", "name", "mcpsv1"},
	{"link", "set", "mcpsv0", "addrgenmode", "none"},
	{"link", "set", "mcpsv1", "addrgenmode", "none"},
	{"link", "set", "mcpsv0", "up"},
	{"link", "set", "mcpsv1", "up"},
	{"addr", "add", "192.0.2.2/24", "dev", "mcpsv0"},
	{"route", "add", "default", "via", "192.0.2.1", "dev", "mcpsv0"},
	{"-6", "addr", "add", "2001:db8::2/64", "dev", "mcpsv0", "nodad"},
	{"-6", "route", "add", "default", "via", "2001:db8::1", "dev", "mcpsv0"},
}

// TestEngineVictimHelper is not a test: run by startVictims in network
// and mount namespaces of its own (unshare), it sets up a default route
// each way, listens on the given ports (every connection is logged to
// DIR/conns.txt and answered 200), starts a sleeping process at each pid from FIRST to
// FIRST+COUNT-1 that it can get (DIR/held.txt), writes its routing
// tables to DIR/routes-before.txt, says "ready", and when its stdin
// closes writes DIR/routes-after.txt and ends its processes.
func TestEngineVictimHelper(t *testing.T) {
	spec := os.Getenv(envVictims)
	if spec == "" {
		return
	}
	f := strings.Split(spec, ",")
	dir := f[0]
	first, _ := strconv.Atoi(f[1])
	count, _ := strconv.Atoi(f[2])
	fail := func(err error) { fmt.Println("error:", err); os.Exit(1) }
	for _, args := range victimNetSetup {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			fail(fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out))
		}
	}
	conns := &lineFile{path: filepath.Join(dir, "conns.txt")}
	for _, port := range f[3:] {
		ln, err := net.Listen("tcp", ":"+port)
		if err != nil {
			fail(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.add(fmt.Sprintf("port %s from %s", port, c.RemoteAddr()))
				go answerOK(c)
			}
		}()
	}
	if err := settleRoutes(); err != nil {
		fail(err)
	}
	if err := writeRoutes(filepath.Join(dir, "routes-before.txt")); err != nil {
		fail(err)
	}
	held, err := placeVictims(first, count)
	defer func() {
		for _, c := range held {
			c.Process.Kill()
			c.Wait()
		}
	}()
	if err != nil {
		fail(err)
	}
	var pids []string
	for _, c := range held {
		pids = append(pids, strconv.Itoa(c.Process.Pid))
	}
	if err := os.WriteFile(filepath.Join(dir, "held.txt"), []byte(strings.Join(pids, "\n")), 0o644); err != nil {
		fail(err)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	if err := writeRoutes(filepath.Join(dir, "routes-after.txt")); err != nil {
		fail(err)
	}
}

// answerOK answers a request with 200, as a service of this host that
// happens to listen on a role's port would (issue 29 measured the
// gateway and sidecar judged ready from this host's own listeners): a
// host that dials here thinking it is a role goes on to what it does
// next, entering the namespace to remove routes included.
func answerOK(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	bufio.NewReader(c).ReadString('\n')
	io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
}

// placeVictims starts `sleep` at each free pid from first on: the
// kernel's last pid is set to the one before, then a child is started.
// From the highest number down, so that what this host starts meanwhile
// gets numbers above the range (the kernel gives the next free one after
// the last), not the next one to place; a process may still take the
// number between the write and the start, so each is tried a few times,
// and a number another process holds is left to it.
func placeVictims(first, count int) ([]*exec.Cmd, error) {
	runtime.LockOSThread() // no new thread of ours takes a number between the write and the fork
	defer runtime.UnlockOSThread()
	var held []*exec.Cmd
	got := map[int]bool{}
	// Three passes: a number a short-lived process took is free again.
	for pass := 0; pass < 3; pass++ {
		for pid := first + count - 1; pid >= first; pid-- {
			if got[pid] {
				continue
			}
			c, err := placeVictim(pid)
			if err != nil {
				return held, err
			}
			if c != nil {
				held, got[pid] = append(held, c), true
			}
		}
	}
	return held, nil
}

// placeVictim starts `sleep` at pid, or returns nil when another process
// holds it or kept taking it.
func placeVictim(pid int) (*exec.Cmd, error) {
	for try := 0; try < 8 && !pidExists(pid); try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644); err != nil {
			return nil, fmt.Errorf("setting this host's last pid (root needed): %w", err)
		}
		c := exec.Command("sleep", "1800")
		if err := c.Start(); err != nil {
			return nil, err
		}
		if c.Process.Pid == pid {
			return c, nil
		}
		c.Process.Kill()
		c.Wait()
	}
	return nil, nil
}

func pidExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// writeRoutes writes this network namespace's IPv4 and IPv6 routes (as
// /proc/net shows them to this process), in [routeTable]'s form.
func writeRoutes(path string) error {
	var b strings.Builder
	for _, f := range []string{"/proc/net/route", "/proc/net/ipv6_route"} {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		b.WriteString(routeTable(string(data)))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// settleRoutes waits for the kernel to add the local route of the IPv6
// address (it does so after the address is added, even without duplicate
// address detection), so that the tables read before are final.
func settleRoutes() error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, err := os.ReadFile("/proc/net/ipv6_route")
		if err != nil {
			return err
		}
		if strings.Contains(routeTable(string(data)), "v6 20010db8000000000000000000000002/80 ") {
			return nil
		}
	}
	return errors.New("the local route of 2001:db8::2 never appeared")
}

// routeTable is /proc/net/route or /proc/net/ipv6_route text without its
// reference and use counters, which the kernel moves on its own (a
// multicast route's references): one line per route, destination, mask
// or prefix length, gateway, flags, metric, device.
func routeTable(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 11 && f[0] != "Iface": // route: Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT
			fmt.Fprintf(&b, "v4 %s/%s via %s flags %s metric %s dev %s\n", f[1], f[7], f[2], f[3], f[6], f[0])
		case len(f) == 10: // ipv6_route: dest plen src splen nexthop metric refcnt use flags dev
			fmt.Fprintf(&b, "v6 %s/%s from %s/%s via %s metric %s flags %s dev %s\n", f[0], f[1], f[2], f[3], f[4], f[5], f[8], f[9])
		}
	}
	return b.String()
}

// defaultRoutes is the default routes (IPv4 and IPv6, with a gateway)
// of a [routeTable].
func defaultRoutes(table string) (v4, v6 []string) {
	for _, l := range strings.Split(table, "\n") {
		switch {
		case strings.HasPrefix(l, "v4 00000000/00000000 via ") && !strings.HasPrefix(l, "v4 00000000/00000000 via 00000000 "):
			v4 = append(v4, l)
		case strings.HasPrefix(l, "v6 "+strings.Repeat("0", 32)+"/00 ") && !strings.Contains(l, " via "+strings.Repeat("0", 32)+" "):
			v6 = append(v6, l)
		}
	}
	return v4, v6
}

// lineFile appends lines to a file, one writer at a time.
type lineFile struct {
	mu   sync.Mutex
	path string
}

func (l *lineFile) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// victims are the local processes TestEngineVictimHelper holds.
type victims struct {
	dir   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	held  map[int]string // pid -> its /proc/<pid>/stat start time
	first int
	count int
	out   *bufio.Reader
}

// startVictims holds count consecutive pids of this host, from a range
// where all are free and this host's next pids are far, in a namespace
// of their own listening on ports. Root only.
func startVictims(t *testing.T, count int, ports ...int) *victims {
	t.Helper()
	first, err := freePidRange(count)
	if err != nil {
		t.Fatal(err)
	}
	v := &victims{dir: t.TempDir(), held: map[int]string{}, first: first, count: count}
	spec := []string{v.dir, strconv.Itoa(first), strconv.Itoa(count)}
	for _, p := range ports {
		spec = append(spec, strconv.Itoa(p))
	}
	v.cmd = exec.Command("unshare", "--net", "--mount", "--fork", "--kill-child", os.Args[0], "-test.run=^TestEngineVictimHelper$")
	v.cmd.Env = append(os.Environ(), envVictims+"="+strings.Join(spec, ","))
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	v.stdin, _ = v.cmd.StdinPipe()
	stdout, _ := v.cmd.StdoutPipe()
	v.cmd.Stderr = os.Stderr
	t.Cleanup(func() { v.kill() })
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("starting the victims' holder: %v", err)
	}
	v.out = bufio.NewReader(stdout)
	ready := make(chan string, 1)
	go func() {
		for {
			line, err := v.out.ReadString('\n')
			if strings.HasPrefix(line, "ready") || strings.HasPrefix(line, "error") || err != nil {
				ready <- strings.TrimSpace(line)
				return
			}
		}
	}()
	select {
	case line := <-ready:
		if line != "ready" {
			t.Fatalf("the victims' holder: %q", line)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the victims' holder was not ready in 2 minutes")
	}
	data, err := os.ReadFile(filepath.Join(v.dir, "held.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		v.held[pid] = startTime(pid)
	}
	t.Logf("victims: %d of the pids %d..%d held by local processes with a network namespace of their own", len(v.held), first, first+count-1)
	if len(v.held) < count*9/10 {
		t.Fatalf("only %d of %d pids could be held (this host took the others meanwhile)", len(v.held), count)
	}
	return v
}

// freePidRange finds count consecutive free pids of this host, away from
// the pids it gives next (its last pid), below pid_max.
func freePidRange(count int) (int, error) {
	max := readInt("/proc/sys/kernel/pid_max")
	last := readInt("/proc/sys/kernel/ns_last_pid")
	if max == 0 || last == 0 {
		return 0, errors.New("cannot read pid_max or ns_last_pid")
	}
	lo, hi := 1000, max-count-1
	if hi <= lo {
		return 0, fmt.Errorf("pid_max %d is too small to hold %d pids", max, count)
	}
	for i := 0; i < 40; i++ {
		first := lo + (last-lo+max/2+i*(count+97))%(hi-lo)
		free := true
		for p := first; p < first+count && free; p++ {
			free = !pidExists(p)
		}
		if free {
			return first, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free pids below %d", count, max)
}

func readInt(path string) int {
	data, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// startTime is field 22 of /proc/<pid>/stat, "" when it cannot be read.
func startTime(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// stillHeld reports whether pid is held by the same victim as at the
// start (the same start time), so that the number was never another
// process's meanwhile.
func (v *victims) stillHeld(pid int) bool {
	st, ok := v.held[pid]
	return ok && st != "" && startTime(pid) == st
}

// finish ends the holder and returns its namespace's routes before and
// after, and the connections its listeners accepted.
func (v *victims) finish(t *testing.T) (before, after string, conns []string) {
	t.Helper()
	v.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- v.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the victims' holder: %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("the victims' holder did not end")
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(v.dir, name))
		if err != nil && name != "conns.txt" {
			t.Errorf("the victims' holder: %v", err)
		}
		return string(data)
	}
	before, after = read("routes-before.txt"), read("routes-after.txt")
	conns = strings.Split(strings.TrimSpace(read("conns.txt")), "\n")
	if conns[0] == "" {
		conns = nil
	}
	return before, after, conns
}

// kill ends the holder and every victim (one process group).
func (v *victims) kill() {
	if v.cmd != nil && v.cmd.Process != nil {
		syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		v.cmd.Wait()
	}
}
