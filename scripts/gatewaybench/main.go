//go:build linux

// Command gatewaybench measures the egress gateway against Debian's Squid,
// side by side in one run, on loopback only: CONNECT tunnel throughput (one
// and many parallel streams), the latency a new tunnel adds, and resident
// memory while holding many idle tunnels. Both proxies get the equivalent
// configuration (internal/spec's squid.conf for the same netpolicy.Config,
// access log on for both) and reach an in-process upstream on 127.0.0.1.
//
//	go run ./scripts/gatewaybench -bin bin/mcpsidecar
//
// It prints a Markdown table (docs/PERFORMANCE.md, "Issue 4").
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/scripts/internal/benchkit"
)

type options struct {
	bin, squid      string
	oneBytes        int64
	manyStreams     int
	manyBytes       int64
	latencyN, idleN int
	rounds          int
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/mcpsidecar", "mcpsidecar binary")
	flag.StringVar(&o.squid, "squid", "/usr/sbin/squid", "squid binary")
	flag.Int64Var(&o.oneBytes, "one-bytes", 512<<20, "bytes through the single-stream tunnel")
	flag.IntVar(&o.manyStreams, "streams", 64, "parallel streams")
	flag.Int64Var(&o.manyBytes, "many-bytes", 8<<20, "bytes through each parallel stream")
	flag.IntVar(&o.latencyN, "latency-n", 1000, "new tunnels timed")
	flag.IntVar(&o.idleN, "idle", 1000, "idle tunnels held for the memory figure")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds, alternating the engines; medians are reported")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "gatewaybench:", err)
		os.Exit(1)
	}
}

// proxy is one engine under test.
func run(o options) error {
	benchkit.RaiseNoFile()
	dir, err := os.MkdirTemp("", "gatewaybench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	up, err := startUpstream()
	if err != nil {
		return err
	}
	cfg := netpolicy.NewConfig([]string{".bench.test"}, []string{"127.0.0.1/32"})
	// Squid checks Safe_ports before SSL_ports, so the port goes in both lists.
	cfg.ConnectPorts = append(cfg.ConnectPorts, up.port)
	cfg.HTTPPorts = append(cfg.HTTPPorts, up.port)
	ours, err := startOurs(o.bin, dir, cfg)
	if err != nil {
		return err
	}
	defer benchkit.Stop(ours)
	sq, err := startSquid(o.squid, dir, cfg)
	if err != nil {
		return err
	}
	defer benchkit.Stop(sq)
	target := fmt.Sprintf("127.0.0.1:%d", up.port)
	engines := []*benchkit.Proxy{ours, sq}
	res := map[string]*figures{"ours": {}, "squid": {}}
	for _, p := range engines {
		res[p.Name].rssStart = benchkit.RSS(p.Cmd.Process.Pid)
	}
	// The machine is shared and noisy: alternate the engines round by
	// round so both see the same conditions, and report medians.
	for round := range o.rounds {
		for _, p := range engines {
			if err := res[p.Name].round(o, p, target); err != nil {
				return fmt.Errorf("%s, round %d: %w", p.Name, round, err)
			}
		}
	}
	for _, p := range engines {
		held, err := idleTunnels(p, target, o.idleN)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		res[p.Name].rssIdle = held
	}
	direct := directLatency(o, target)
	printTable(o, res, direct)
	return nil
}

// figures are one engine's measurements over all rounds.
type figures struct {
	one, many         []float64 // MB/s per round
	lat               []float64 // µs, every tunnel of every round
	rssStart, rssIdle int64
}

func (f *figures) round(o options, p *benchkit.Proxy, target string) error {
	one, err := throughput(p.Addr, target, 1, o.oneBytes)
	if err != nil {
		return err
	}
	many, err := throughput(p.Addr, target, o.manyStreams, o.manyBytes)
	if err != nil {
		return err
	}
	lat, err := latency(p.Addr, target, o.latencyN)
	if err != nil {
		return err
	}
	f.one, f.many, f.lat = append(f.one, one), append(f.many, many), append(f.lat, lat...)
	return nil
}

func (f *figures) row() []string {
	return []string{
		fmt.Sprintf("%.0f", benchkit.Pct(f.one, 50)), fmt.Sprintf("%.0f", benchkit.Pct(f.many, 50)),
		fmt.Sprintf("%.0f / %.0f", benchkit.Pct(f.lat, 50), benchkit.Pct(f.lat, 99)),
		fmt.Sprintf("%.1f", float64(f.rssStart)/(1<<20)), fmt.Sprintf("%.1f", float64(f.rssIdle)/(1<<20)),
	}
}

func printTable(o options, res map[string]*figures, direct []float64) {
	rows := map[string][]string{"ours": res["ours"].row(), "squid": res["squid"].row()}
	fmt.Printf("| figure | mcpsidecar gateway | squid 5.7 |\n|---|---|---|\n")
	names := []string{
		fmt.Sprintf("CONNECT throughput, 1 stream, %d MiB (MB/s, median of %d)", o.oneBytes>>20, o.rounds),
		fmt.Sprintf("CONNECT throughput, %d streams x %d MiB (MB/s aggregate, median of %d)", o.manyStreams, o.manyBytes>>20, o.rounds),
		fmt.Sprintf("new tunnel to first upstream byte, p50 / p99 (µs, %d tunnels)", o.rounds*o.latencyN),
		"RSS at start (MiB)",
		fmt.Sprintf("RSS holding %d idle tunnels (MiB)", o.idleN),
	}
	for i, n := range names {
		fmt.Printf("| %s | %s | %s |\n", n, rows["ours"][i], rows["squid"][i])
	}
	fmt.Printf("\nDirect connection to first byte (no proxy), p50 / p99: %.0f / %.0f µs.\n", benchkit.Pct(direct, 50), benchkit.Pct(direct, 99))
}

// upstream serves: "S <n>\n" streams n bytes; "I\n" holds the connection
// idle; anything else gets one byte at once (latency).
type upstream struct{ port uint16 }

func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveUpstream(c)
		}
	}()
	return &upstream{port: uint16(ln.Addr().(*net.TCPAddr).Port)}, nil
}

func serveUpstream(c net.Conn) {
	defer c.Close()
	if _, err := c.Write([]byte{'!'}); err != nil {
		return
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	switch {
	case strings.HasPrefix(line, "S "):
		n, _ := strconv.ParseInt(strings.TrimSpace(line[2:]), 10, 64)
		buf := make([]byte, 64<<10)
		for n > 0 {
			m := min(n, int64(len(buf)))
			if _, err := c.Write(buf[:m]); err != nil {
				return
			}
			n -= m
		}
	case strings.HasPrefix(line, "I"):
		io.Copy(io.Discard, c)
	}
}

func throughput(proxyAddr, target string, streams int, each int64) (float64, error) {
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	start := time.Now()
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, br, err := benchkit.Tunnel(proxyAddr, target)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "S %d\n", each)
			n, err := io.Copy(io.Discard, br)
			if err == nil && n != each {
				err = fmt.Errorf("got %d bytes, want %d", n, each)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(int64(streams)*each) / 1e6 / time.Since(start).Seconds(), nil
}

// latency times n sequential new tunnels: dial, CONNECT, first upstream
// byte (µs).
func latency(proxyAddr, target string, n int) ([]float64, error) {
	var out []float64
	for range n {
		start := time.Now()
		c, _, err := benchkit.Tunnel(proxyAddr, target)
		if err != nil {
			return nil, err
		}
		out = append(out, float64(time.Since(start).Microseconds()))
		c.Close()
	}
	return out, nil
}

func directLatency(o options, target string) []float64 {
	var out []float64
	for range o.latencyN {
		start := time.Now()
		c, err := net.Dial("tcp", target)
		if err != nil {
			continue
		}
		b := make([]byte, 1)
		c.Read(b)
		out = append(out, float64(time.Since(start).Microseconds()))
		c.Close()
	}
	return out
}

// idleTunnels opens n tunnels, leaves them idle, and returns the proxy's
// resident memory (with its children, for Squid's helpers).
func idleTunnels(p *benchkit.Proxy, target string, n int) (int64, error) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, _, err := benchkit.Tunnel(p.Addr, target)
		if err != nil {
			return 0, fmt.Errorf("tunnel %d: %w", len(conns), err)
		}
		fmt.Fprintf(c, "I\n")
		conns = append(conns, c)
	}
	time.Sleep(2 * time.Second)
	return benchkit.RSS(p.Cmd.Process.Pid), nil
}

func startOurs(bin, dir string, cfg netpolicy.Config) (*benchkit.Proxy, error) {
	addr, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	pol, _ := json.Marshal(cfg)
	polFile := filepath.Join(dir, runs.FileGatewayPolicy)
	if err := os.WriteFile(polFile, pol, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "gateway", "--listen", addr, "--policy", polFile,
		"--decision-log", filepath.Join(dir, runs.FileDecisions), "--max-tunnels", "4096")
	cmd.Env = []string{"GOMAXPROCS=2"}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &benchkit.Proxy{Name: "ours", Addr: addr, Cmd: cmd}
	return p, benchkit.WaitHealthy(p, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
}

func startSquid(bin, dir string, cfg netpolicy.Config) (*benchkit.Proxy, error) {
	addr, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	conf := spec.SquidConf(cfg)
	conf = strings.Replace(conf, fmt.Sprintf("http_port %d", spec.GatewayPort), "http_port "+addr, 1)
	conf = strings.Replace(conf, "stdio:"+spec.OutputDir+"/"+runs.FileSquidAccessLog, "stdio:"+filepath.Join(dir, runs.FileSquidAccessLog), 1)
	conf = strings.Replace(conf, "cache_log /tmp/squid-cache.log", "cache_log "+filepath.Join(dir, "cache.log"), 1)
	// Loopback only: no DNS server, no hosts file, a private pid file, and
	// enough descriptors for the idle-tunnel figure.
	conf += fmt.Sprintf("pid_filename %s\ndns_nameservers 127.0.0.1\nhosts_file none\nmax_filedescriptors 8192\nshutdown_lifetime 1 seconds\npinger_enable off\n",
		filepath.Join(dir, "squid.pid"))
	confFile := filepath.Join(dir, runs.FileSquidConf)
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-N", "-f", confFile)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &benchkit.Proxy{Name: "squid", Addr: addr, Cmd: cmd}
	return p, benchkit.WaitHealthy(p, func() bool {
		c, _, err := benchkit.Tunnel(addr, "127.0.0.1:1")
		if c != nil {
			c.Close()
		}
		return err != nil && !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(err.Error(), "connection refused")
	})
}
