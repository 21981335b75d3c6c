//go:build testcommands

// Red-team workload for the Kubernetes backend (e2e/redteam-kube/README.md).
// It is copied into a private copy of the tree's internal/cli (never this
// repository's) and built into a test binary; the harness then builds that
// binary into the run's image and --x-workload-cmd x-redteam runs it as the
// agent container's workload. It hardens itself exactly as the built-in
// agent does (hardenRole("agent", ...), required), so every attempt below is
// what a compromised agent process could do.
package cli

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func init() {
	subcommands = append(subcommands, newRedteamCmd)
	inContainer["x-redteam"] = true
}

func newRedteamCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use: "x-redteam MODE", Hidden: true, Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := hardenRole("agent", os.Getenv, s.Err, true, "/sandbox-output"); err != nil {
				return err
			}
			out := s.Out
			switch args[0] {
			case "probe":
				rtProbe(out)
			case "pad":
				rtPad(out, args[1:])
			case "fill":
				// pad past the gateway's file size limit, then the
				// request that should be recorded (args[3]).
				rtPad(out, args[1:3])
				rtLine(out, "after-fill request %s -> %s", args[3], rtGet(args[3]))
			case "flood":
				rtLine(out, "FIRST LINE: the workload's own account of what it did")
				line := strings.Repeat("x", 1023) + "\n"
				for i := 0; i < 12<<10; i++ {
					io.WriteString(out, line)
				}
				rtLine(out, "LAST LINE")
			}
			return nil
		},
	}
}

func rtLine(w io.Writer, f string, a ...any) { fmt.Fprintf(w, "RT "+f+"\n", a...) }

func rtProbe(w io.Writer) {
	for _, e := range os.Environ() {
		k, v, _ := strings.Cut(e, "=")
		if len(v) > 60 {
			v = v[:60] + "..."
		}
		rtLine(w, "env %s=%s", k, v)
	}
	for _, p := range []string{"/var/run/secrets/kubernetes.io/serviceaccount/token", "/run/secrets", "/etc/hosts",
		"/etc/resolv.conf", "/etc/hostname", "/proc/self/mountinfo", "/proc/net/route", "/proc/net/tcp", "/proc/1/environ",
		"/dev/termination-log", "/proc/self/status"} {
		b, err := os.ReadFile(p)
		if len(b) > 1500 {
			b = b[:1500]
		}
		rtLine(w, "read %s err=%v\n%s", p, err, b)
	}
	for _, p := range []string{"/dev/termination-log", "/dev/shm/x", "/etc/hosts", "/etc/resolv.conf", "/tmp/x", "/sandbox-output/x", "/dev/x", "/x"} {
		err := os.WriteFile(p, []byte("redteam\n"), 0o644)
		if err != nil {
			f, err2 := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err2 == nil {
				_, err2 = f.WriteString("redteam\n")
				f.Close()
			}
			rtLine(w, "write %s create-err=%v append-err=%v", p, err, err2)
			continue
		}
		rtLine(w, "write %s OK", p)
	}
	// Abstract unix socket: the pod's containers share a network namespace.
	_, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	rtLine(w, "socket unix err=%v", err)
	_, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	rtLine(w, "socket udp err=%v", err)
	_, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, syscall.IPPROTO_ICMP)
	rtLine(w, "socket icmp-dgram err=%v", err)
	_, err = syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, 0)
	rtLine(w, "socket netlink err=%v", err)
	_, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	rtLine(w, "socket packet err=%v", err)
	err = syscall.Unshare(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET)
	rtLine(w, "unshare user+net err=%v", err)

	gw, sc := rtPeer("egress-gateway"), rtPeer("mcp-sidecar")
	rtLine(w, "peers gateway=%s sidecar=%s", gw, sc)
	var targets []string
	for _, p := range []string{"3128", "8000", "16250", "16443", "16248", "22", "10250", "2375"} {
		targets = append(targets, "10.237.0.1:"+p, "127.0.0.1:"+p)
	}
	// Other pods of the subnet on the agent's Landlock ports (other runs'
	// gateways and sidecars), the gateway's and sidecar's other ports,
	// the service subnet, IPv6.
	for i := 2; i < 80; i++ {
		targets = append(targets, fmt.Sprintf("10.237.0.%d:3128", i), fmt.Sprintf("10.237.0.%d:8000", i))
	}
	targets = append(targets, gw+":3129", gw+":9090", gw+":8000", sc+":3128", "10.238.0.1:443", "10.238.0.10:53",
		"[::1]:3128", "[fe80::1%eth0]:3128", "[fd00::1]:3128", "0.0.0.0:3128")
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", t, 1500*time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				c.Close()
				rtLine(w, "dial %s CONNECTED", t)
				return
			}
			if !strings.Contains(err.Error(), "permission denied") {
				rtLine(w, "dial %s err=%v", t, err)
			}
		}()
	}
	wg.Wait()
	rtLine(w, "dial: targets not printed were refused with permission denied (Landlock)")
	// Through the gateway.
	for _, req := range []string{
		"CONNECT 10.237.0.1:16250 HTTP/1.1\r\nHost: 10.237.0.1:16250\r\n\r\n",
		"CONNECT 10.237.0.1:16443 HTTP/1.1\r\nHost: 10.237.0.1:16443\r\n\r\n",
		"CONNECT 127.0.0.1:16443 HTTP/1.1\r\nHost: 127.0.0.1:16443\r\n\r\n",
		"CONNECT mcp-sidecar:8000 HTTP/1.1\r\nHost: mcp-sidecar:8000\r\n\r\n",
		"CONNECT egress-gateway:3128 HTTP/1.1\r\nHost: egress-gateway:3128\r\n\r\n",
		"CONNECT kubernetes.default.svc:443 HTTP/1.1\r\nHost: kubernetes.default.svc:443\r\n\r\n",
		"CONNECT mcpsidecar-kube-node:16250 HTTP/1.1\r\nHost: mcpsidecar-kube-node:16250\r\n\r\n",
		"CONNECT localhost:3128 HTTP/1.1\r\nHost: localhost:3128\r\n\r\n",
		"GET http://10.237.0.1:16250/pods HTTP/1.1\r\nHost: 10.237.0.1:16250\r\n\r\n",
		"GET http://[::ffff:10.237.0.1]:16250/pods HTTP/1.1\r\nHost: [::ffff:10.237.0.1]:16250\r\n\r\n",
		"GET http://10.238.0.1/ HTTP/1.1\r\nHost: 10.238.0.1\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nHost: egress-gateway:3128\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nHost: egress-gateway:3128\r\n\r\n",
		"GET /debug/pprof/ HTTP/1.1\r\nHost: egress-gateway:3128\r\n\r\n",
	} {
		rtLine(w, "gateway %q -> %s", strings.SplitN(req, "\r\n", 2)[0], rtRaw(gw+":3128", req))
	}
	for _, p := range []string{"/healthz", "/metrics", "/debug/pprof/", "/", "/audit"} {
		rtLine(w, "sidecar GET %s -> %s", p, rtRaw(sc+":8000", "GET "+p+" HTTP/1.1\r\nHost: mcp-sidecar:8000\r\n\r\n"))
	}
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		if e.Name()[0] >= '0' && e.Name()[0] <= '9' {
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			pids = append(pids, e.Name()+":"+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	rtLine(w, "pids %v", pids)
}

func rtGet(url string) string {
	host := strings.SplitN(strings.TrimPrefix(url, "http://"), "/", 2)[0]
	return rtRaw(rtPeer("egress-gateway")+":3128", "GET "+url+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
}

// rtPeer is a peer's address from /etc/hosts (the mapping's host aliases).
func rtPeer(name string) string {
	b, _ := os.ReadFile("/etc/hosts")
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		for _, n := range f[min(1, len(f)):] {
			if n == name {
				return f[0]
			}
		}
	}
	return name
}

func rtRaw(addr, req string) string {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return "write: " + err.Error()
	}
	l, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(l) + fmt.Sprintf(" (err=%v)", err)
}

// rtPad makes one request worth hiding (args[0], a raw request line's
// target, sent as an absolute-URI GET), then denied requests with long
// hosts until the gateway's decision log is past the host's 16 MiB read
// cap, so the whole log is left out of the record.
func rtPad(w io.Writer, args []string) {
	gw := rtPeer("egress-gateway") + ":3128"
	if len(args) > 0 && args[0] != "-" {
		rtLine(w, "secret request %s -> %s", args[0], rtGet(args[0]))
	}
	host := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60) + ".invalid"
	n := 40000
	if len(args) > 1 {
		fmt.Sscan(args[1], &n)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, fail := 0, 0
	start := time.Now()
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			var r *bufio.Reader
			for i := g; i < n; i += 16 {
				if c == nil {
					var err error
					if c, err = net.DialTimeout("tcp", gw, 2*time.Second); err != nil {
						mu.Lock()
						fail++
						mu.Unlock()
						time.Sleep(10 * time.Millisecond)
						continue
					}
					r = bufio.NewReader(c)
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				req := fmt.Sprintf("GET http://%s/%d HTTP/1.1\r\nHost: %s\r\n\r\n", host, i, host)
				resp, err := rtReadResp(c, r, req)
				mu.Lock()
				if err != nil {
					fail++
				} else {
					ok++
				}
				mu.Unlock()
				if err != nil || resp {
					c.Close()
					c = nil
				}
			}
			if c != nil {
				c.Close()
			}
		}()
	}
	wg.Wait()
	rtLine(w, "pad: %d answered, %d failed, %s", ok, fail, time.Since(start))
}

// rtReadResp sends req and reads one response; closed says the server
// closes the connection.
func rtReadResp(c net.Conn, r *bufio.Reader, req string) (closed bool, err error) {
	if _, err := io.WriteString(c, req); err != nil {
		return true, err
	}
	length := 0
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return true, err
		}
		l = strings.TrimSpace(l)
		if l == "" {
			break
		}
		k, v, _ := strings.Cut(l, ":")
		switch strings.ToLower(k) {
		case "content-length":
			fmt.Sscan(strings.TrimSpace(v), &length)
		case "connection":
			closed = strings.EqualFold(strings.TrimSpace(v), "close")
		}
	}
	_, err = io.CopyN(io.Discard, r, int64(length))
	return closed, err
}
