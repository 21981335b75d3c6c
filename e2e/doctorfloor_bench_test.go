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
	"sort"
	"strconv"
	"strings"
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
// After one warm-up doctor (which builds the image), N pairs
// (MCPSIDECAR_BENCH_N, default 10); it prints the medians, their ratio,
// and doctor's phases (run-metadata.json) with the time outside them:
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
	var doctors, floors, inPhases []float64
	phases := map[string][]float64{}
	for i := range n {
		// Alternate which goes first, so neither always follows the other.
		var d, f float64
		var m hxMeta
		if i%2 == 0 {
			d, m = dfDoctor(b, id, runsDir)
			f = dfFloor(b, image, label)
		} else {
			f = dfFloor(b, image, label)
			d, m = dfDoctor(b, id, runsDir)
		}
		doctors, floors = append(doctors, d), append(floors, f)
		sum := 0.0
		for _, p := range m.Phases {
			phases[p.Name] = append(phases[p.Name], p.DurationMS)
			sum += p.DurationMS
		}
		inPhases = append(inPhases, sum)
		hxFigure("pair %d: doctor %.0f ms (phases %.0f ms), floor %.0f ms, ratio %.2f", i+1, d, sum, f, d/f)
	}
	d, f := median(doctors), median(floors)
	var outside []float64
	for i := range doctors {
		outside = append(outside, doctors[i]-inPhases[i])
	}
	hxFigure("doctor (whole process) median %.0f ms; floor median %.0f ms; ratio %.2f (n=%d)", d, f, d/f, n)
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
// two networks cannot avoid, through the same client.
func dfFloor(b *testing.B, image, label string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, v, _ := strings.Cut(label, "=")
	labels := map[string]string{"mcpsidecar.test": "1", k: v}
	start := time.Now()
	eng, err := dockerx.New()
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	var nets []string
	for i, internal := range []bool{true, false} {
		spec := dockerx.NetworkSpec{Name: "mcpsidecar-floor-" + RandHex(4), Internal: internal, Labels: labels}
		var netID string
		// A /28 of 10.215.0.0/16 (doctor's runs take 10.213.0.0/16), as
		// doctor names its subnets; another one when the engine says taken.
		for try := 0; ; try++ {
			spec.Subnet = fmt.Sprintf("10.215.%d.%d/28", rand.IntN(256), rand.IntN(16)*16)
			if netID, err = eng.CreateNetwork(ctx, spec); err == nil || try == 5 {
				break
			}
		}
		if err != nil {
			b.Fatalf("floor network %d: %v", i, err)
		}
		nets = append(nets, netID)
	}
	var ids []string
	for i := range 3 {
		att := []dockerx.Attachment{{Network: nets[0]}}
		if i == 0 { // the gateway's place: on both networks
			att = append(att, dockerx.Attachment{Network: nets[1]})
		}
		cid, err := eng.CreateContainer(ctx, dockerx.ContainerSpec{Name: "mcpsidecar-floor-" + RandHex(4), Image: image,
			Cmd: []string{"version"}, Labels: labels, Networks: att})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, cid)
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
