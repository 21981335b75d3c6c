//go:build docker

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil/enginehost"
)

// BenchmarkWineDoctor is issue 31's figure: `doctor`'s wall time for the
// Windows build under wine against a Docker engine elsewhere over plain
// TCP, and for the Linux build against the same engine, interleaved (the
// order alternates each round) after one warm-up run of each (each builds
// its image once: their CA bundles differ). Both are product builds, and
// the Windows build's image carries the Linux one. Also wine's own start
// (`mcpsidecar.exe version`). docs/PERFORMANCE.md, "Issue 31":
//
//	go test -tags docker -run '^$' -bench BenchmarkWineDoctor -benchtime 1x -timeout 60m ./e2e/
func BenchmarkWineDoctor(b *testing.B) {
	const rounds = 5
	id := RandHex(6)
	w := newWine(b, id)
	eng := enginehost.Start(b, enginehost.Options{})
	linux := buildFor(b, "linux", filepath.Join(b.TempDir(), "mcpsidecar"))
	labels := "MCPSIDECAR_LABELS=" + TestLabel + ",mcpsidecar.e2e=" + id
	wenv := append(wineEngineEnv(w, eng, id), "MCPSIDECAR_IMAGE_BINARY="+w.winPath(linux))
	runsDir := filepath.Join(w.scratch, "runs")
	doctor := map[string]func() time.Duration{
		"windows build under wine": func() time.Duration {
			r := w.run(b, wenv, "doctor", "--quiet", "--runs-dir", w.winPath(runsDir+"-wine"))
			if r.code != 0 {
				b.Fatalf("doctor under wine exited %d:\n%s", r.code, hxTail(r.stderr, 3000))
			}
			return r.took
		},
		"linux build": func() time.Duration {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, linux, "doctor", "--quiet", "--runs-dir", runsDir+"-linux")
			cmd.Env = append(append(cleanEnv(), eng.Env...), labels)
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("doctor (linux) failed: %v\n%s", err, hxTail(string(out), 3000))
			}
			return time.Since(start)
		},
		"wine start (mcpsidecar.exe version)": func() time.Duration { return w.run(b, nil, "version").took },
	}
	order := []string{"windows build under wine", "linux build", "wine start (mcpsidecar.exe version)"}
	for _, name := range order[:2] {
		b.Logf("warm-up, %s: %s", name, doctor[name]().Round(time.Millisecond))
	}
	samples := map[string][]time.Duration{}
	for i := range rounds {
		names := slices.Clone(order)
		if i%2 == 1 {
			names[0], names[1] = names[1], names[0]
		}
		for _, name := range names {
			d := doctor[name]()
			samples[name] = append(samples[name], d)
			b.Logf("round %d, %s: %s", i+1, name, d.Round(time.Millisecond))
		}
	}
	for _, name := range order {
		s := slices.Sorted(slices.Values(samples[name]))
		b.Logf("%s: median of %d %s (samples %v)", name, rounds, s[rounds/2].Round(time.Millisecond), s)
		b.ReportMetric(s[rounds/2].Seconds(), strings.Fields(name)[0]+"-s")
	}
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		if left := eng.Docker(b, append(kind, "--filter", "label=mcpsidecar.e2e="+id)...); left != "" {
			b.Errorf("docker %s on the engine: left %s", kind[0], left)
		}
	}
}
