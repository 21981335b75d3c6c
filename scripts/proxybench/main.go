//go:build linux

// Command proxybench measures the egress gateway against smokescreen and
// Debian's Squid, side by side in one run, on loopback only (issue 19):
// plain-HTTP forwarding (requests/s, p50, proxy CPU per request, upstream
// connections per 100 requests) with keep-alive clients, and CONNECT (new
// tunnel latency, sequential and concurrent; proxy CPU per GB tunnelled;
// resident memory holding idle tunnels). The engines take turns round by
// round; medians are reported. Each proxy runs on the core -proxy-cpu
// (taskset), this process (load generator and upstream) wherever it was
// started; scripts/bench-proxies.sh pins it to the other core.
//
//	scripts/bench-proxies.sh            # builds, installs, pins, runs
//
// Every address is 127.0.0.1: the upstream is an in-process Go server
// reached by IP literal, which each proxy's configuration allows (ours and
// Squid: the same netpolicy.Config, allowed_ip_addresses 127.0.0.1/32;
// smokescreen: --allow-range 127.0.0.1/32, no other range).
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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/scripts/internal/benchkit"
)

type options struct {
	bin, smokescreen, squid string
	proxyCPU                string
	engines                 string
	httpClients, httpN      int
	seqN, concN, conc       int
	gbBytes                 int64
	idleN, rounds           int
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/mcpsidecar", "mcpsidecar binary")
	flag.StringVar(&o.smokescreen, "smokescreen", filepath.Join(os.Getenv("HOME"), "go/bin/smokescreen"), "smokescreen binary")
	flag.StringVar(&o.squid, "squid", "/usr/sbin/squid", "squid binary")
	flag.StringVar(&o.proxyCPU, "proxy-cpu", "1", "CPU list the proxies are pinned to (taskset -c); empty: not pinned")
	flag.StringVar(&o.engines, "engines", "ours,smokescreen,squid", "engines to compare")
	flag.IntVar(&o.httpClients, "http-clients", 16, "keep-alive plain-HTTP clients")
	flag.IntVar(&o.httpN, "http-n", 8000, "plain-HTTP requests per round")
	flag.IntVar(&o.seqN, "seq-n", 2000, "sequential new tunnels per round")
	flag.IntVar(&o.concN, "conc-n", 2000, "concurrent new tunnels per round")
	flag.IntVar(&o.conc, "conc", 16, "concurrency of the concurrent new tunnels")
	flag.Int64Var(&o.gbBytes, "tunnel-bytes", 512<<20, "bytes through one tunnel for the CPU-per-GB figure")
	flag.IntVar(&o.idleN, "idle", 1000, "idle tunnels held for the memory figure")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds, the engines taking turns; medians are reported")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(1)
	}
}

type figures struct {
	rps, p50, cpuReq, connsPer100 []float64
	seqP50, seqP99, concP50       []float64
	cpuGB                         []float64
	rssIdle                       float64
}

func run(o options) error {
	benchkit.RaiseNoFile()
	dir, err := os.MkdirTemp("", "proxybench-")
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
	// Squid checks Safe_ports before SSL_ports, so the ports go in both lists.
	cfg.ConnectPorts = append(cfg.ConnectPorts, up.port, up.httpPort)
	cfg.HTTPPorts = append(cfg.HTTPPorts, up.port, up.httpPort)
	var engines []*benchkit.Proxy
	defer func() {
		for _, p := range engines {
			benchkit.Stop(p)
		}
	}()
	for _, name := range strings.Split(o.engines, ",") {
		var p *benchkit.Proxy
		switch name {
		case "ours":
			p, err = startOurs(o, dir, cfg)
		case "smokescreen":
			p, err = startSmokescreen(o, dir)
		case "squid":
			p, err = startSquid(o, dir, cfg)
		default:
			err = fmt.Errorf("unknown engine %q", name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		engines = append(engines, p)
	}
	target := fmt.Sprintf("127.0.0.1:%d", up.port)
	res := map[string]*figures{}
	for _, p := range engines {
		res[p.Name] = &figures{}
	}
	for round := range o.rounds {
		for _, p := range engines {
			if err := res[p.Name].round(o, p, up, target); err != nil {
				return fmt.Errorf("%s, round %d: %w", p.Name, round, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %s done\n", round, p.Name)
		}
	}
	for _, p := range engines {
		held, err := idleTunnels(p, target, o.idleN)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		res[p.Name].rssIdle = float64(held) / (1 << 20)
	}
	printTable(o, engines, res)
	return nil
}

func (f *figures) round(o options, p *benchkit.Proxy, up *upstream, target string) error {
	rps, p50, cpu, conns, err := plainHTTP(o, p, up, fmt.Sprintf("127.0.0.1:%d", up.httpPort))
	if err != nil {
		return fmt.Errorf("plain HTTP: %w", err)
	}
	f.rps, f.p50, f.cpuReq, f.connsPer100 = append(f.rps, rps), append(f.p50, p50), append(f.cpuReq, cpu), append(f.connsPer100, conns)
	lat, err := newTunnels(p.Addr, target, o.seqN, 1)
	if err != nil {
		return fmt.Errorf("sequential tunnels: %w", err)
	}
	f.seqP50, f.seqP99 = append(f.seqP50, benchkit.Pct(lat, 50)), append(f.seqP99, benchkit.Pct(lat, 99))
	lat, err = newTunnels(p.Addr, target, o.concN, o.conc)
	if err != nil {
		return fmt.Errorf("concurrent tunnels: %w", err)
	}
	f.concP50 = append(f.concP50, benchkit.Pct(lat, 50))
	cpu0 := benchkit.CPUTime(p.Cmd.Process.Pid)
	if _, err := throughput(p.Addr, target, o.gbBytes); err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	f.cpuGB = append(f.cpuGB, (benchkit.CPUTime(p.Cmd.Process.Pid)-cpu0).Seconds()*1000/(float64(o.gbBytes)/1e9))
	return nil
}

func printTable(o options, engines []*benchkit.Proxy, res map[string]*figures) {
	med := func(v []float64) float64 { return benchkit.Pct(v, 50) }
	rows := []struct {
		name string
		get  func(f *figures) string
	}{
		{fmt.Sprintf("plain HTTP, %d keep-alive clients: requests/s", o.httpClients), func(f *figures) string { return fmt.Sprintf("%.0f", med(f.rps)) }},
		{"plain HTTP: p50 (µs)", func(f *figures) string { return fmt.Sprintf("%.0f", med(f.p50)) }},
		{"plain HTTP: proxy CPU per request (µs)", func(f *figures) string { return fmt.Sprintf("%.0f", med(f.cpuReq)) }},
		{"plain HTTP: upstream connections per 100 requests", func(f *figures) string { return fmt.Sprintf("%.2f", med(f.connsPer100)) }},
		{fmt.Sprintf("CONNECT new tunnel, sequential: p50 / p99 (µs, %d per round)", o.seqN), func(f *figures) string {
			return fmt.Sprintf("%.0f / %.0f", med(f.seqP50), med(f.seqP99))
		}},
		{fmt.Sprintf("CONNECT new tunnel, %d concurrent: p50 (µs)", o.conc), func(f *figures) string { return fmt.Sprintf("%.0f", med(f.concP50)) }},
		{fmt.Sprintf("CONNECT proxy CPU per GB tunnelled (ms, 1 stream of %d MiB)", o.gbBytes>>20), func(f *figures) string { return fmt.Sprintf("%.0f", med(f.cpuGB)) }},
		{fmt.Sprintf("RSS holding %d idle tunnels (MiB)", o.idleN), func(f *figures) string { return fmt.Sprintf("%.1f", f.rssIdle) }},
	}
	fmt.Printf("| figure (median of %d rounds) |", o.rounds)
	for _, p := range engines {
		fmt.Printf(" %s |", p.Name)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("---|", len(engines)))
	for _, r := range rows {
		fmt.Printf("| %s |", r.name)
		for _, p := range engines {
			fmt.Printf(" %s |", r.get(res[p.Name]))
		}
		fmt.Println()
	}
	fmt.Println("\nper round:")
	for _, p := range engines {
		f := res[p.Name]
		fmt.Printf("%s: req/s %v p50 %v cpu/req %v conns/100 %v seq p50 %v conc p50 %v cpu/GB %v\n", p.Name,
			ints(f.rps), ints(f.p50), ints(f.cpuReq), f.connsPer100, ints(f.seqP50), ints(f.concP50), ints(f.cpuGB))
	}
}

func ints(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}

// upstream is two loopback servers: plain HTTP on httpPort (a small
// answer, keep-alive, counting the connections it accepts), and a raw
// protocol on port for tunnels: it sends '!' at once, then "S <n>\n"
// streams n bytes, "I\n" holds the connection.
type upstream struct {
	port, httpPort uint16
	conns          atomic.Int64
}

func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{port: uint16(ln.Addr().(*net.TCPAddr).Port), httpPort: uint16(hl.Addr().(*net.TCPAddr).Port)}
	body := []byte(strings.Repeat("x", 128))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}}
	go srv.Serve(hl)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveTunnel(c, bufio.NewReader(c))
		}
	}()
	return u, nil
}

func serveTunnel(c net.Conn, br *bufio.Reader) {
	defer c.Close()
	if _, err := c.Write([]byte{'!'}); err != nil {
		return
	}
	line, err := br.ReadString('\n')
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
		io.Copy(io.Discard, br)
	}
}

// plainHTTP sends o.httpN GET requests through the proxy from
// o.httpClients keep-alive clients.
func plainHTTP(o options, p *benchkit.Proxy, up *upstream, target string) (rps, p50, cpuPerReq, connsPer100 float64, err error) {
	pu, _ := url.Parse("http://" + p.Addr)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), MaxIdleConnsPerHost: o.httpClients, MaxConnsPerHost: o.httpClients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	u := "http://" + target + "/small"
	// Warm up: one request per client connection.
	get := func() error {
		resp, err := client.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	if err := get(); err != nil {
		return 0, 0, 0, 0, err
	}
	conns0 := up.conns.Load()
	cpu0 := benchkit.CPUTime(p.Cmd.Process.Pid)
	var next atomic.Int64
	lats := make([][]float64, o.httpClients)
	errs := make(chan error, o.httpClients)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range o.httpClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(o.httpN) {
				t0 := time.Now()
				if err := get(); err != nil {
					errs <- err
					return
				}
				lats[i] = append(lats[i], float64(time.Since(t0).Microseconds()))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, 0, 0, err
	}
	cpu := benchkit.CPUTime(p.Cmd.Process.Pid) - cpu0
	var all []float64
	for _, l := range lats {
		all = append(all, l...)
	}
	n := float64(len(all))
	return n / elapsed.Seconds(), benchkit.Pct(all, 50), float64(cpu.Microseconds()) / n,
		float64(up.conns.Load()-conns0) * 100 / n, nil
}

// newTunnels opens n tunnels from conc goroutines and returns each one's
// time from dial to the upstream's first byte (µs).
func newTunnels(proxyAddr, target string, n, conc int) ([]float64, error) {
	var next atomic.Int64
	lats := make([][]float64, conc)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				c, _, err := benchkit.Tunnel(proxyAddr, target)
				if err != nil {
					errs <- err
					return
				}
				lats[i] = append(lats[i], float64(time.Since(t0).Microseconds()))
				c.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	var all []float64
	for _, l := range lats {
		all = append(all, l...)
	}
	return all, nil
}

func throughput(proxyAddr, target string, n int64) (float64, error) {
	c, br, err := benchkit.Tunnel(proxyAddr, target)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "S %d\n", n)
	got, err := io.Copy(io.Discard, br)
	if err == nil && got != n {
		err = fmt.Errorf("got %d bytes, want %d", got, n)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), err
}

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

// command runs bin pinned to the proxy core.
func command(o options, bin string, args ...string) *exec.Cmd {
	if o.proxyCPU == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("taskset", append([]string{"-c", o.proxyCPU, bin}, args...)...)
}

func startOurs(o options, dir string, cfg netpolicy.Config) (*benchkit.Proxy, error) {
	addr, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	pol, _ := json.Marshal(cfg)
	polFile := filepath.Join(dir, runs.FileGatewayPolicy)
	if err := os.WriteFile(polFile, pol, 0o644); err != nil {
		return nil, err
	}
	cmd := command(o, o.bin, "gateway", "--listen", addr, "--policy", polFile,
		"--decision-log", filepath.Join(dir, runs.FileDecisions), "--max-tunnels", "4096")
	cmd.Env = []string{}
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

// startSmokescreen runs smokescreen with no ACL file (every public
// destination allowed) and loopback's one address let through: the
// upstream. Its per-request log lines go to a file, as ours and Squid's do.
func startSmokescreen(o options, dir string) (*benchkit.Proxy, error) {
	addr, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := command(o, o.smokescreen, "--listen-ip", "127.0.0.1", "--listen-port", port,
		"--allow-range", "127.0.0.1/32", "--statsd-address", "127.0.0.1:1")
	cmd.Env = []string{}
	logf, err := os.Create(filepath.Join(dir, "smokescreen.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr, cmd.Stdout = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &benchkit.Proxy{Name: "smokescreen", Addr: addr, Cmd: cmd}
	return p, benchkit.WaitHealthy(p, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func startSquid(o options, dir string, cfg netpolicy.Config) (*benchkit.Proxy, error) {
	addr, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	conf := spec.SquidConf(cfg)
	conf = strings.Replace(conf, fmt.Sprintf("http_port %d", spec.GatewayPort), "http_port "+addr, 1)
	conf = strings.Replace(conf, "stdio:"+spec.OutputDir+"/"+runs.FileSquidAccessLog, "stdio:"+filepath.Join(dir, runs.FileSquidAccessLog), 1)
	conf = strings.Replace(conf, "cache_log /tmp/squid-cache.log", "cache_log "+filepath.Join(dir, "cache.log"), 1)
	conf += fmt.Sprintf("pid_filename %s\ndns_nameservers 127.0.0.1\nhosts_file none\nmax_filedescriptors 8192\nshutdown_lifetime 1 seconds\npinger_enable off\n",
		filepath.Join(dir, "squid.pid"))
	confFile := filepath.Join(dir, runs.FileSquidConf)
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := command(o, o.squid, "-N", "-f", confFile)
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
