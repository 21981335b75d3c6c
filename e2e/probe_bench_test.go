//go:build docker

package e2e

// The probe suite's figures (docs/PERFORMANCE.md, "Issue 8 — probe suite" and
// "Issue 12 — the proof").

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/probe"
)

// BenchmarkProbeFigures runs test-sandbox on the default spec b.N times
// (warm image after the first) and reports the medians of its wall time,
// of the harness's wait phase (the agent container running the suite), and
// of the suite alone (first to last line of status.ndjson), plus the
// number of probes per verdict:
//
//	MCPSIDECAR_BIN=$PWD/bin/mcpsidecar go test -tags docker -run '^$' \
//	  -bench BenchmarkProbeFigures -benchtime 6x ./e2e/
func BenchmarkProbeFigures(b *testing.B) {
	NeedDocker(b)
	id := "probe-bench-" + RandHex(4)
	label := "mcpsidecar.e2e=" + id
	b.Cleanup(func() {
		for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
			out, _ := exec.Command("docker", append(kind, "--filter", "label="+label)...).Output()
			if len(out) > 0 {
				fmt.Fprintf(os.Stderr, "benchmark left %v: %s\n", kind, out)
			}
		}
	})
	runsDir := b.TempDir()
	var wall, wait, suite []float64
	var counts map[probe.Verdict]int
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cmd := exec.Command(os.Getenv("MCPSIDECAR_BIN"), "test-sandbox", "--allow-old-engine", "--quiet", "--runs-dir", runsDir)
		if cmd.Path == "" || os.Getenv("MCPSIDECAR_BIN") == "" {
			b.Fatal("set MCPSIDECAR_BIN (make build)")
		}
		cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS="+TestLabel+","+label)
		out, err := cmd.CombinedOutput()
		elapsed := time.Since(start)
		dir := probeNewestRun(b, runsDir)
		rep, lerr := probe.LoadReport(filepath.Join(dir, "report.json"))
		if lerr != nil {
			b.Fatalf("test-sandbox: %v; %v\n%s", err, lerr, out)
		}
		if i == 0 {
			continue // the first run may build the image
		}
		counts = rep.Counts()
		wall = append(wall, float64(elapsed.Milliseconds()))
		wait = append(wait, probePhaseMS(b, dir, "wait"))
		suite = append(suite, probeSuiteMS(b, filepath.Join(dir, "status.ndjson")))
	}
	if len(wall) == 0 {
		return // testing's first b.N=1 round: a warm-up only; use -benchtime 6x
	}
	b.ReportMetric(probeMedian(wall), "test-sandbox-ms")
	b.ReportMetric(probeMedian(wait), "wait-phase-ms")
	b.ReportMetric(probeMedian(suite), "suite-ms")
	for _, v := range []probe.Verdict{probe.Pass, probe.Violation, probe.Unsupported} {
		b.ReportMetric(float64(counts[v]), string(v)+"-probes")
	}
	fmt.Fprintf(os.Stderr, "probe figures over %d warm runs: test-sandbox %.0f ms, wait phase %.0f ms, suite %.0f ms; verdicts %v\n",
		len(wall), probeMedian(wall), probeMedian(wait), probeMedian(suite), counts)
}

func probeNewestRun(b *testing.B, runsDir string) string {
	ents, err := os.ReadDir(runsDir)
	if err != nil || len(ents) == 0 {
		b.Fatalf("no run directory in %s: %v", runsDir, err)
	}
	return filepath.Join(runsDir, ents[len(ents)-1].Name())
}

func probePhaseMS(b *testing.B, dir, name string) float64 {
	var m struct {
		Phases []struct {
			Name       string  `json:"name"`
			DurationMS float64 `json:"duration_ms"`
		} `json:"phases"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "run-metadata.json"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		b.Fatalf("reading run-metadata.json: %v", err)
	}
	for _, p := range m.Phases {
		if p.Name == name {
			return p.DurationMS
		}
	}
	b.Fatalf("run-metadata.json has no %s phase", name)
	return 0
}

// suiteMS is the time from the first to the last status.ndjson event.
func probeSuiteMS(b *testing.B, path string) float64 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var first, last time.Time
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			T time.Time `json:"timestamp_utc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			b.Fatalf("status.ndjson: %v", err)
		}
		if first.IsZero() {
			first = e.T
		}
		last = e.T
	}
	return float64(last.Sub(first).Milliseconds())
}

func probeMedian(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
