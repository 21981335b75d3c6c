//go:build linux

// Package benchkit holds what the proxy benchmarks in scripts/ share: the
// proxy process under test (start, readiness, stop), its resident memory and
// CPU time read from /proc, a CONNECT tunnel through it, and percentiles.
// Loopback only: nothing here dials anything but the address it is given.
package benchkit

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proxy is a proxy process under test, listening on Addr.
type Proxy struct {
	Name, Addr string
	Cmd        *exec.Cmd
}

// WaitHealthy polls ok every 100 ms for up to 20 s; on timeout it stops p
// and says which proxy never became ready.
func WaitHealthy(p *Proxy, ok func() bool) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ok() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	Stop(p)
	return fmt.Errorf("%s never became ready", p.Name)
}

// Stop sends SIGTERM and kills the process when it has not exited after 5 s.
func Stop(p *Proxy) {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.Cmd.Process.Kill()
		<-done
	}
}

// RaiseNoFile lifts the soft open-files limit to the hard one (the idle
// tunnel figures hold thousands of sockets).
func RaiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// FreePort returns a loopback address with a port free at the time of asking.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Tunnel opens a CONNECT tunnel through the proxy at proxyAddr to target and
// returns the reader positioned after the upstream's greeting byte '!'.
func Tunnel(proxyAddr, target string) (net.Conn, *bufio.Reader, error) {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, nil, fmt.Errorf("CONNECT %s: %s", target, resp.Status)
	}
	if b, err := br.ReadByte(); err != nil || b != '!' {
		c.Close()
		return nil, nil, fmt.Errorf("first byte: %v", err)
	}
	return c, br, nil
}

// Pct is the p-th percentile of v (nearest rank, v left unsorted); 0 for none.
func Pct(v []float64, p int) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// RSS is VmRSS of pid plus its direct children's, in bytes.
func RSS(pid int) int64 {
	total := vmRSS(pid)
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, k := range strings.Fields(string(kids)) {
		if n, err := strconv.Atoi(k); err == nil {
			total += vmRSS(n)
		}
	}
	return total
}

func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// CPUTime is utime+stime of pid, in clock ticks of 10 ms (USER_HZ 100).
func CPUTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// fields after ")": state(0) ... utime(11) stime(12)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
