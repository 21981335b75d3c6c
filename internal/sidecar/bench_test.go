//go:build linux

package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkLocalToolCall measures a loopback round trip of the local tool
// through streamable HTTP, with the audit log on and off side by side
// (-count interleaves them). Clients: "raw" posts a fixed JSON-RPC body with
// net/http (the cost of the sidecar alone), "gosdk" is the go-sdk client
// (what an agent built on the SDK pays, client work included). "serial" is
// one client (latency); "parallel" is 8 clients (throughput). Reported:
// p50/p99 in µs, calls/s, and the peak resident memory of the test process
// (client and server together: an upper bound for the sidecar).
func BenchmarkLocalToolCall(b *testing.B) {
	for _, client := range []string{"raw", "gosdk"} {
		for _, mode := range []struct {
			name    string
			clients int
		}{{"serial", 1}, {"parallel", 8}} {
			for _, audit := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/%s/audit=%v", client, mode.name, audit), func(b *testing.B) {
					benchCalls(b, client, mode.clients, audit)
				})
			}
		}
	}
}

// caller makes one tools/call of the local tool.
type caller func(ctx context.Context) error

func newCaller(b *testing.B, ctx context.Context, kind, endpoint string) caller {
	hc := &http.Client{Transport: &http.Transport{}}
	if kind == "raw" {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_html_element_name","arguments":{}}}`)
		return func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`\u003ctable\u003e`)) && !bytes.Contains(got, []byte("<table>"))) {
				err = fmt.Errorf("unexpected answer %d %s", resp.StatusCode, got)
			}
			return err
		}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return func(ctx context.Context) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolHTMLElementName})
		return err
	}
}

func benchCalls(b *testing.B, kind string, clients int, audit bool) {
	cfg := Config{UpstreamURL: "http://127.0.0.1:1/mcp"}
	if audit {
		log, err := OpenAuditLog(filepath.Join(b.TempDir(), AuditFileName))
		if err != nil {
			b.Fatal(err)
		}
		cfg.Audit = log
	}
	sc, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	callers := make([]caller, clients)
	for i := range callers {
		callers[i] = newCaller(b, ctx, kind, "http://"+ln.Addr().String()+MCPPath)
	}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i, call := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := call(ctx); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MB")
	// CPU time per call (client and server, user+system) is the figure the
	// other benchmarks on a shared machine disturb least.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/call")
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS reads VmHWM (peak resident set) of this process, in bytes.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
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

// BenchmarkAuditWrite is the audit log's own cost per record, isolated from
// the noise of a loaded machine: redaction, bounding, marshalling and one
// O_APPEND write of a realistic record (a Learn search result preview).
func BenchmarkAuditWrite(b *testing.B) {
	log, err := OpenAuditLog(filepath.Join(b.TempDir(), AuditFileName))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	preview := strings.Repeat(`{"title":"Make HTTP requests with the HttpClient class","contentUrl":"https://learn.microsoft.com/dotnet"}`, 20)
	rec := Record{
		Time: timestamp(time.Now()), SessionID: "conn-0123456789ab", Kind: KindToolCall, Name: "microsoft_docs_search",
		Arguments: []byte(`{"query":"How do I obtain an HttpClient in .NET 8?"}`), OK: true, DurationMS: 12.5,
		ResultPreview: preview, CorrelationID: newTraceID(),
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			log.Write(rec)
		}
	})
}
