//go:build linux

package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// The test binary serves instead of running tests when envBenchChild is
// set: the process benchmarks measure a server in its own process, free of
// the load generator's share. envBenchChild names the server ("sidecar" or
// "bare"); envBenchAudit is the sidecar's audit log ("" turns it off).
// envBenchSidecarGOGC, set for the benchmark, becomes the sidecar child's
// GOGC (to compare values against [GCPercent]; the bare child keeps Go's).
const (
	envBenchChild       = "MCPSIDECAR_BENCH_CHILD"
	envBenchAudit       = "MCPSIDECAR_BENCH_AUDIT"
	envBenchSidecarGOGC = "MCPSIDECAR_BENCH_SIDECAR_GOGC"
)

func TestMain(m *testing.M) {
	if kind, ok := os.LookupEnv(envBenchChild); ok {
		if err := serveChild(kind, os.Getenv(envBenchAudit)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveChild serves on a loopback port, prints the address, and stops when
// stdin closes.
func serveChild(kind, audit string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = bufio.NewReader(os.Stdin).ReadString('\n'); cancel() }()
	switch kind {
	case "bare":
		fmt.Println(ln.Addr().String())
		return serveBare(ctx, ln)
	case "sidecar":
		sc, err := benchSidecar(audit)
		if err != nil {
			return err
		}
		TuneGC(os.Getenv) // what the role does at start (internal/cli)
		fmt.Println(ln.Addr().String())
		return sc.Serve(ctx, ln)
	}
	return fmt.Errorf("unknown bench child %q", kind)
}

func benchSidecar(audit string) (*Sidecar, error) {
	cfg := Config{UpstreamURL: "http://127.0.0.1:1/mcp", NoUpstream: true}
	if audit != "" {
		log, err := OpenAuditLog(audit)
		if err != nil {
			return nil, err
		}
		cfg.Audit = log
	}
	return New(cfg)
}

// serveBare is the benchmark twin of the sidecar: a bare go-sdk server with
// the same trivial tool over the same transport options (streamable HTTP,
// stateless, JSON responses) and the Go runtime's defaults, with nothing of
// the sidecar's (no front, audit, middleware or tuning). The sidecar is
// measured against it.
func serveBare(ctx context.Context, ln net.Listener) error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: ToolHTMLElementName, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: HTMLElementName}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := &http.Server{Handler: h}
	go func() { <-ctx.Done(); _ = hs.Close() }()
	if err := hs.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// benchServer is a server child process.
type benchServer struct {
	name     string
	endpoint string
	pid      int
}

// startChild starts a server child with GOMAXPROCS 1 (as in its container)
// on cpus (nil: anywhere) and stops it when b ends.
func startChild(b *testing.B, kind, audit string, cpus []int) *benchServer {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBenchChild+"="+kind, envBenchAudit+"="+audit, "GOMAXPROCS=1")
	if v := os.Getenv(envBenchSidecarGOGC); v != "" && kind == "sidecar" {
		cmd.Env = append(cmd.Env, "GOGC="+v) // a sweep: TuneGC leaves an explicit GOGC alone
	}
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := startOn(cmd, cpus); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return &benchServer{name: kind, endpoint: "http://" + strings.TrimSpace(addr) + MCPPath, pid: cmd.Process.Pid}
}

// startOn starts cmd with its CPU affinity set to cpus: a forked child
// inherits the mask of the thread that forks it, so the thread is locked,
// narrowed for the fork and restored.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	defer unix.SchedSetaffinity(0, &old)
	return cmd.Start()
}

// pinSelf moves every thread of this process to cpus (threads created
// later inherit the mask of their creator), and undoes it when b ends.
func pinSelf(b *testing.B, cpus []int) {
	var set, old unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	_ = unix.SchedGetaffinity(0, &old)
	setAll := func(s *unix.CPUSet) {
		tids, _ := os.ReadDir("/proc/self/task")
		for _, t := range tids {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				_ = unix.SchedSetaffinity(tid, s)
			}
		}
	}
	setAll(&set)
	b.Cleanup(func() { setAll(&old) })
}

// BenchmarkSidecarProcess runs the sidecar in a child process and loads it
// with 8 raw HTTP clients, audit on and off side by side. It reports the
// server's own CPU per call and its peak resident memory (VmHWM), free of
// the client's share.
func BenchmarkSidecarProcess(b *testing.B) {
	for _, audit := range []bool{true, false} {
		b.Run(fmt.Sprintf("audit=%v", audit), func(b *testing.B) {
			path := ""
			if audit {
				path = filepath.Join(b.TempDir(), AuditFileName)
			}
			srv := startChild(b, "sidecar", path, nil)
			callers := newCallers(b, srv.endpoint, 8)
			b.ResetTimer()
			cpu0 := procCPU(srv.pid)
			st := runCalls(b, callers, b.N)
			cpu := procCPU(srv.pid) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/st.elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-cpu-µs/call")
			b.ReportMetric(float64(procHWM(srv.pid))/(1<<20), "server-peak-rss-MB")
		})
	}
}

func newCallers(b *testing.B, endpoint string, n int) []caller {
	callers := make([]caller, n)
	for i := range callers {
		callers[i] = newCaller(b, context.Background(), "raw", endpoint)
	}
	return callers
}

// callStats is what one batch of calls measured.
type callStats struct {
	elapsed time.Duration
	lat     []time.Duration
}

// runCalls makes n calls spread over the callers, each its own client
// connection, and returns the wall time and every call's latency.
func runCalls(b *testing.B, callers []caller, n int) callStats {
	var next atomic.Int64
	lat := make([][]time.Duration, len(callers))
	var wg sync.WaitGroup
	start := time.Now()
	for i, call := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := call(context.Background()); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	st := callStats{elapsed: time.Since(start)}
	for _, l := range lat {
		st.lat = append(st.lat, l...)
	}
	return st
}

// procCPU reads user+system CPU time of pid from /proc/pid/stat.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start after ')'.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / hz
}

// procHWM reads the peak resident set size of pid, in bytes.
func procHWM(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
