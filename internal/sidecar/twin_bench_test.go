//go:build linux

package sidecar

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// twinRound is how many calls one server takes before the other gets its
// turn: short enough that both see the same machine load (the benchmark
// shares 2 cores with builds), long enough to reach a steady state.
const twinRound = 500

// BenchmarkSidecarVsBare measures the sidecar (audit on, runtime tuned as
// the role tunes it) against its twin, a bare go-sdk server with the same
// trivial tool (see [serveBare]), in one run: both run as child processes
// with GOMAXPROCS 1 on the last CPU, the raw HTTP clients on the others,
// and the two take turns of [twinRound] calls until each has made b.N.
// Reported per server: calls/s, p50, server CPU per call and peak RSS
// (VmHWM); "ratio" is the sidecar's calls/s over the bare server's.
func BenchmarkSidecarVsBare(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchTwins(b, clients)
		})
	}
}

// twin is one server under test and what it has measured so far.
type twin struct {
	*benchServer
	callers []caller
	elapsed time.Duration
	lat     []time.Duration
	cpu     time.Duration
}

func benchTwins(b *testing.B, clients int) {
	var serverCPUs, clientCPUs []int
	if n := runtime.NumCPU(); n >= 2 {
		serverCPUs = []int{n - 1}
		for c := range n - 1 {
			clientCPUs = append(clientCPUs, c)
		}
		pinSelf(b, clientCPUs)
	}
	twins := []*twin{
		{benchServer: startChild(b, "bare", "", serverCPUs)},
		{benchServer: startChild(b, "sidecar", filepath.Join(b.TempDir(), AuditFileName), serverCPUs)},
	}
	for _, t := range twins {
		t.callers = newCallers(b, t.endpoint, clients)
		runCalls(b, t.callers, twinRound) // warm up: connections, first GC cycles
	}
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		n := min(twinRound, b.N-done)
		for i := range twins {
			t := twins[(i+round)%2] // alternate who goes first
			cpu0 := procCPU(t.pid)
			st := runCalls(b, t.callers, n)
			t.cpu += procCPU(t.pid) - cpu0
			t.elapsed += st.elapsed
			t.lat = append(t.lat, st.lat...)
		}
		done += n
	}
	b.StopTimer()
	rate := make([]float64, 2)
	for i, t := range twins {
		slices.Sort(t.lat)
		if len(t.lat) == 0 {
			return
		}
		rate[i] = float64(len(t.lat)) / t.elapsed.Seconds()
		b.ReportMetric(rate[i], t.name+"-calls/s")
		b.ReportMetric(float64(t.lat[len(t.lat)/2].Microseconds()), t.name+"-p50-µs")
		b.ReportMetric(float64(t.cpu.Microseconds())/float64(len(t.lat)), t.name+"-cpu-µs/call")
		b.ReportMetric(float64(procHWM(t.pid))/(1<<20), t.name+"-peak-rss-MB")
	}
	b.ReportMetric(rate[1]/rate[0], "ratio")
	b.ReportMetric(0, "ns/op") // per-op time mixes both servers: meaningless
}
