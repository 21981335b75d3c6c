//go:build docker

package e2e

// Issue 19 item 4: whole-process doctor against the API floor, in one run
// (docs/PERFORMANCE.md, "Issue 19 — side by side").

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// BenchmarkDoctorVsFloor times, interleaved, the whole `mcpsidecar doctor
// --allow-old-engine` process (exec to exit) and the floor any sandbox of
// its shape costs on this engine, written with the same Docker API client
// (internal/dockerx, the client made inside the timing): two networks, and
// three containers of doctor's own image (running `mcpsidecar version`)
// created, started, waited for and removed, then the networks removed.
// After one warm-up doctor (which builds the image), N rounds
// (MCPSIDECAR_BENCH_N, default 10); it prints the medians, their ratio,
// and doctor's phases (run-metadata.json) with the time outside them.
//
// Each round also times a second floor, the concurrent floor
// (dfFloorConcurrent): the same calls made as concurrently as doctor's
// order allows, since doctor overlaps what does not depend on that order
// (orchestrate.Session.Apply) while the first floor makes every call one
// after another. The ratio to each is printed; the three are run in an
// order that rotates from round to round:
//
//	make build
//	MCPSIDECAR_BIN=$PWD/bin/mcpsidecar go test -tags docker -run '^$' \
//	  -bench BenchmarkDoctorVsFloor -benchtime 1x -timeout 30m ./e2e/
func BenchmarkDoctorVsFloor(b *testing.B) {
	NeedDocker(b)
	n := 10
	if v, err := strconv.Atoi(os.Getenv("MCPSIDECAR_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	id := RandHex(6)
	label := "mcpsidecar.e2e=" + id
	b.Cleanup(func() { hxCleanupB(label) })
	runsDir := filepath.Join(b.TempDir(), "runs")
	warm := hxDoctorB(b, id, runsDir)
	image := warm.Image.Tag
	var doctors, floors, floorsC, inPhases []float64
	phases := map[string][]float64{}
	for i := range n {
		// Rotate which goes first, so none always follows another.
		var d, f, fc float64
		var m hxMeta
		runs := []func(){
			func() { d, m = dfDoctor(b, id, runsDir) },
			func() { f = dfFloor(b, image, label) },
			func() { fc = dfFloorConcurrent(b, image, label) },
		}
		for k := range runs {
			runs[(i+k)%len(runs)]()
		}
		doctors, floors, floorsC = append(doctors, d), append(floors, f), append(floorsC, fc)
		sum := 0.0
		for _, p := range m.Phases {
			phases[p.Name] = append(phases[p.Name], p.DurationMS)
			sum += p.DurationMS
		}
		inPhases = append(inPhases, sum)
		hxFigure("pair %d: doctor %.0f ms (phases %.0f ms), floor %.0f ms, ratio %.2f; concurrent floor %.0f ms, ratio %.2f",
			i+1, d, sum, f, d/f, fc, d/fc)
	}
	d, f, fc := median(doctors), median(floors), median(floorsC)
	var outside []float64
	for i := range doctors {
		outside = append(outside, doctors[i]-inPhases[i])
	}
	hxFigure("doctor (whole process) median %.0f ms; floor median %.0f ms; ratio %.2f (n=%d)", d, f, d/f, n)
	hxFigure("concurrent floor median %.0f ms; doctor's ratio to it %.2f", fc, d/fc)
	hxFigure("doctor phases summed median %.0f ms (ratio %.2f); outside the phases (exec, flags, engine client, spec, report) median %.0f ms",
		median(inPhases), median(inPhases)/f, median(outside))
	names := make([]string, 0, len(phases))
	for name := range phases {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return median(phases[names[i]]) > median(phases[names[j]]) })
	for _, name := range names {
		hxFigure("phase %-10s median %7.1f ms", name, median(phases[name]))
	}
	b.ReportMetric(d, "doctor-ms")
	b.ReportMetric(f, "floor-ms")
	b.ReportMetric(d/f, "ratio")
	b.ReportMetric(fc, "floorc-ms")
	b.ReportMetric(d/fc, "ratio-c")
}

// dfDoctor runs one warm doctor and returns its wall time (ms) and its
// run-metadata.json.
func dfDoctor(b *testing.B, id, runsDir string) (float64, hxMeta) {
	b.Helper()
	start := time.Now()
	m := hxDoctorB(b, id, runsDir)
	return float64(time.Since(start).Microseconds()) / 1000, m
}

// dfFloor is the floor: the Docker API work a three-container sandbox on
// two networks cannot avoid, through the same client, each call made once
// the one before it has returned.
func dfFloor(b *testing.B, image, label string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	eng, err := dockerx.New()
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	var nets []string
	for i := range 2 {
		nets = append(nets, dfNetwork(ctx, b, eng, label, i))
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, dfContainer(ctx, b, eng, image, label, nets, i))
	}
	var waits []<-chan dockerx.WaitResult
	for _, cid := range ids {
		waits = append(waits, eng.WaitContainer(ctx, cid))
		if err := eng.StartContainer(ctx, cid); err != nil {
			b.Fatal(err)
		}
	}
	for _, w := range waits {
		if r := <-w; r.Err != nil || r.ExitCode != 0 {
			b.Fatalf("floor container: exit %d, %v", r.ExitCode, r.Err)
		}
	}
	for _, cid := range ids {
		if err := eng.RemoveContainer(ctx, cid); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range nets {
		if err := eng.RemoveNetwork(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Microseconds()) / 1000
}

// dfNetwork creates the floor's network i (0: internal, 1: not) on a /28
// of 10.215.0.0/16 (doctor's runs take 10.213.0.0/16), as doctor names its
// subnets; another one when the engine says taken.
func dfNetwork(ctx context.Context, b *testing.B, eng *dockerx.Client, label string, i int) string {
	k, v, _ := strings.Cut(label, "=")
	spec := dockerx.NetworkSpec{Name: "mcpsidecar-floor-" + RandHex(4), Internal: i == 0, Labels: map[string]string{"mcpsidecar.test": "1", k: v}}
	var netID string
	var err error
	for try := 0; ; try++ {
		spec.Subnet = fmt.Sprintf("10.215.%d.%d/28", rand.IntN(256), rand.IntN(16)*16)
		if netID, err = eng.CreateNetwork(ctx, spec); err == nil || try == 5 {
			break
		}
	}
	if err != nil {
		b.Errorf("floor network %d: %v", i, err)
		runtime.Goexit()
	}
	return netID
}

// dfContainer creates the floor's container i of doctor's image running
// `mcpsidecar version`; the first is on both networks, as the gateway.
func dfContainer(ctx context.Context, b *testing.B, eng *dockerx.Client, image, label string, nets []string, i int) string {
	k, v, _ := strings.Cut(label, "=")
	att := []dockerx.Attachment{{Network: nets[0]}}
	if i == 0 {
		att = append(att, dockerx.Attachment{Network: nets[1]})
	}
	cid, err := eng.CreateContainer(ctx, dockerx.ContainerSpec{Name: "mcpsidecar-floor-" + RandHex(4), Image: image,
		Cmd: []string{"version"}, Labels: map[string]string{"mcpsidecar.test": "1", k: v}, Networks: att})
	if err != nil {
		b.Errorf("floor container %d: %v", i, err)
		runtime.Goexit()
	}
	return cid
}

// dfFloorConcurrent is the same floor with every call made as early as
// doctor's order allows: the two networks created together, the three
// containers created together, the first two started together (doctor
// starts the sidecar while the gateway becomes ready), the third started
// once both have started (doctor's agent waits for both to be ready),
// the three removed together, then the two networks together.
func dfFloorConcurrent(b *testing.B, image, label string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	eng, err := dockerx.New()
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	together := func(n int, f func(i int)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(i)
			}()
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
	}
	nets := make([]string, 2)
	together(2, func(i int) { nets[i] = dfNetwork(ctx, b, eng, label, i) })
	ids := make([]string, 3)
	waits := make([]<-chan dockerx.WaitResult, 3)
	together(3, func(i int) {
		ids[i] = dfContainer(ctx, b, eng, image, label, nets, i)
		waits[i] = eng.WaitContainer(ctx, ids[i])
	})
	startOne := func(i int) {
		if err := eng.StartContainer(ctx, ids[i]); err != nil {
			b.Errorf("floor start %d: %v", i, err)
		}
	}
	together(2, startOne)
	startOne(2)
	for _, w := range waits {
		if r := <-w; r.Err != nil || r.ExitCode != 0 {
			b.Fatalf("floor container: exit %d, %v", r.ExitCode, r.Err)
		}
	}
	together(3, func(i int) {
		if err := eng.RemoveContainer(ctx, ids[i]); err != nil {
			b.Errorf("floor remove %d: %v", i, err)
		}
	})
	together(2, func(i int) {
		if err := eng.RemoveNetwork(ctx, nets[i]); err != nil {
			b.Errorf("floor network remove %d: %v", i, err)
		}
	})
	return float64(time.Since(start).Microseconds()) / 1000
}
