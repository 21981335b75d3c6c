package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// envBenchChild makes the test binary serve a sidecar instead of running
// tests: BenchmarkSidecarProcess measures the server in its own process.
const envBenchChild = "MCPSIDECAR_BENCH_CHILD_AUDIT"

func TestMain(m *testing.M) {
	if audit, ok := os.LookupEnv(envBenchChild); ok {
		if err := serveChild(audit); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveChild serves on a loopback port, prints the address, and stops when
// stdin closes. audit "" turns auditing off.
func serveChild(audit string) error {
	cfg := Config{UpstreamURL: "http://127.0.0.1:1/mcp"}
	if audit != "" {
		log, err := OpenAuditLog(audit)
		if err != nil {
			return err
		}
		cfg.Audit = log
	}
	sc, err := New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = bufio.NewReader(os.Stdin).ReadString('\n'); cancel() }()
	return sc.Serve(ctx, ln)
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
			benchChild(b, path)
		})
	}
}

func benchChild(b *testing.B, audit string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBenchChild+"="+audit)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	endpoint := "http://" + strings.TrimSpace(addr) + MCPPath
	ctx := context.Background()
	callers := make([]caller, 8)
	for i := range callers {
		callers[i] = newCaller(b, ctx, "raw", endpoint)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := procCPU(cmd.Process.Pid)
	start := time.Now()
	for _, call := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := call(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := procCPU(cmd.Process.Pid) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-cpu-µs/call")
	b.ReportMetric(float64(procHWM(cmd.Process.Pid))/(1<<20), "server-peak-rss-MB")
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
