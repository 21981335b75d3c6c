//go:build docker

package e2e

// The harness's figures (docs/PERFORMANCE.md, "Issue 6 — harness").

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// BenchmarkHarnessFigures measures the figures of docs/PERFORMANCE.md
// ("Issue 6 — harness") in one process, side by side:
//
//	MCPSIDECAR_BIN=$PWD/bin/mcpsidecar go test -tags docker -run '^$' \
//	  -bench BenchmarkHarnessFigures -benchtime 1x ./e2e/
//
// cold image build (classic builder and import), image size, ten warm
// doctor runs (median of each phase), the floor measured alongside (one
// network create plus three create-start-wait-remove cycles of the same
// image running `mcpsidecar version`, then the network removed), and the
// median peak memory of each container.
func BenchmarkHarnessFigures(b *testing.B) {
	NeedDocker(b)
	id := RandHex(6)
	label := "mcpsidecar.e2e=" + id
	b.Cleanup(func() { hxCleanupB(label) })
	runsDir := filepath.Join(b.TempDir(), "runs")
	for _, method := range []string{"build", "import"} {
		ms, size := hxColdImage(b, id, method)
		hxFigure("cold image (%s): %.0f ms, %.1f MB", method, ms, float64(size)/1e6)
		b.ReportMetric(ms, "cold-"+method+"-ms")
		b.ReportMetric(float64(size)/1e6, "image-MB")
	}
	phases := map[string][]float64{}
	peaks := map[string][]float64{}
	var floors, sandbox []float64
	var tag string
	for i := 0; i < 10; i++ {
		m := hxDoctorB(b, id, runsDir)
		tag = m.Image.Tag
		total := 0.0
		for _, p := range m.Phases {
			phases[p.Name] = append(phases[p.Name], p.DurationMS)
			switch p.Name {
			case "networks", "gateway", "sidecar", "agent", "wait", "teardown":
				total += p.DurationMS
			}
		}
		sandbox = append(sandbox, total)
		for _, c := range m.Containers {
			peaks[c.Role] = append(peaks[c.Role], float64(c.PeakMemory)/1e6)
		}
		floors = append(floors, hxFloor(b, tag, label))
	}
	for _, name := range []string{"spec", "preflight", "image", "run-dir", "networks", "gateway", "sidecar", "agent", "wait", "collect", "teardown"} {
		hxFigure("phase %-9s median %8.1f ms", name, median(phases[name]))
	}
	s, f := median(sandbox), median(floors)
	hxFigure("warm sandbox up+down (networks..teardown) median %.1f ms; floor median %.1f ms; ratio %.2f", s, f, s/f)
	b.ReportMetric(s, "sandbox-ms")
	b.ReportMetric(f, "floor-ms")
	b.ReportMetric(s/f, "ratio")
	for role, v := range peaks {
		hxFigure("peak memory %-8s median %.1f MB (max %.1f MB)", role, median(v), maxOf(v))
	}
}

// BenchmarkHarnessColdImage measures only the cold image: five never-seen
// images made by the classic builder, then five by import (median of each):
//
//	MCPSIDECAR_BIN=$PWD/bin/mcpsidecar go test -tags docker -run '^$' \
//	  -bench BenchmarkHarnessColdImage -benchtime 1x ./e2e/
func BenchmarkHarnessColdImage(b *testing.B) {
	NeedDocker(b)
	id := RandHex(6)
	b.Cleanup(func() { hxCleanupB("mcpsidecar.e2e=" + id) })
	for _, method := range []string{"build", "import"} {
		var ms []float64
		for i := 0; i < 5; i++ {
			t, _ := hxColdImage(b, id, method)
			ms = append(ms, t)
		}
		hxFigure("cold image (%s): median %.0f ms of %d (min %.0f, max %.0f)", method, median(ms), len(ms), minOf(ms), maxOf(ms))
		b.ReportMetric(median(ms), "cold-"+method+"-ms")
	}
}

// hxFigure prints one figure line on stdout: benchmark logs are truncated.
func hxFigure(format string, args ...any) {
	fmt.Printf("figure: "+format+"\n", args...)
}

func hxCleanupB(label string) {
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+label).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
	}
	out, _ = exec.Command("docker", "network", "ls", "-q", "--filter", "label="+label).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"network", "rm"}, ids...)...).Run()
	}
}

// hxColdImage times making a never-seen image (the binary plus a unique
// trailer) by method, through doctor's image phase, then removes it.
func hxColdImage(b *testing.B, id, method string) (float64, int64) {
	b.Helper()
	data, err := os.ReadFile(BinaryB(b))
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "mcpsidecar")
	if err := os.WriteFile(bin, append(data, []byte("cold-"+method+"-"+RandHex(8))...), 0o755); err != nil {
		b.Fatal(err)
	}
	runsDir := filepath.Join(b.TempDir(), "runs")
	cmd := exec.Command(BinaryB(b), "doctor", "--allow-old-engine", "--quiet", "--runs-dir", runsDir)
	cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS="+TestLabel+",mcpsidecar.e2e="+id,
		"MCPSIDECAR_IMAGE_BINARY="+bin, "MCPSIDECAR_IMAGE_METHOD="+method)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("doctor (%s): %v\n%s", method, err, out)
	}
	entries, _ := os.ReadDir(runsDir)
	m := hxReadMetaB(b, filepath.Join(runsDir, entries[0].Name()))
	defer exec.Command("docker", "rmi", "-f", m.Image.Tag).Run()
	if m.Image.Method != method {
		b.Fatalf("image method %q, want %q", m.Image.Method, method)
	}
	for _, p := range m.Phases {
		if p.Name == "image" {
			out, _ := exec.Command("docker", "image", "inspect", "-f", "{{.Size}}", m.Image.Tag).Output()
			var size int64
			_, _ = fmt.Sscan(strings.TrimSpace(string(out)), &size)
			return p.DurationMS, size
		}
	}
	b.Fatal("no image phase")
	return 0, 0
}

func hxDoctorB(b *testing.B, id, runsDir string) hxMeta {
	b.Helper()
	before, _ := os.ReadDir(runsDir)
	cmd := exec.Command(BinaryB(b), "doctor", "--allow-old-engine", "--quiet", "--runs-dir", runsDir)
	cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS="+TestLabel+",mcpsidecar.e2e="+id)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("doctor: %v\n%s", err, out)
	}
	after, _ := os.ReadDir(runsDir)
	if len(after) != len(before)+1 {
		b.Fatalf("want one new run directory")
	}
	names := []string{}
	for _, e := range after {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return hxReadMetaB(b, filepath.Join(runsDir, names[len(names)-1]))
}

func hxReadMetaB(b *testing.B, runDir string) hxMeta {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil {
		b.Fatal(err)
	}
	var m hxMeta
	if err := json.Unmarshal(data, &m); err != nil {
		b.Fatal(err)
	}
	return m
}

// hxFloor is the least any sandbox of three containers costs on this
// engine: a network, and three containers of the same image created,
// started, waited for and removed, one after another.
func hxFloor(b *testing.B, image, label string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eng, err := dockerx.New()
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	k, v, _ := strings.Cut(label, "=")
	labels := map[string]string{"mcpsidecar.test": "1", k: v}
	start := time.Now()
	netID, err := eng.CreateNetwork(ctx, dockerx.NetworkSpec{Name: "mcpsidecar-floor-" + RandHex(4), Internal: true, Labels: labels})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		cid, err := eng.CreateContainer(ctx, dockerx.ContainerSpec{Name: "mcpsidecar-floor-" + RandHex(4), Image: image,
			Cmd: []string{"version"}, Labels: labels, Networks: []dockerx.Attachment{{Network: netID}}})
		if err != nil {
			b.Fatal(err)
		}
		wait := eng.WaitContainer(ctx, cid)
		if err := eng.StartContainer(ctx, cid); err != nil {
			b.Fatal(err)
		}
		if r := <-wait; r.Err != nil || r.ExitCode != 0 {
			b.Fatalf("floor container: exit %d, %v", r.ExitCode, r.Err)
		}
		if err := eng.RemoveContainer(ctx, cid); err != nil {
			b.Fatal(err)
		}
	}
	if err := eng.RemoveNetwork(ctx, netID); err != nil {
		b.Fatal(err)
	}
	return float64(time.Since(start).Microseconds()) / 1000
}

// BinaryB is Binary for benchmarks.
func BinaryB(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("MCPSIDECAR_BIN"); p != "" {
		return p
	}
	b.Fatal("set MCPSIDECAR_BIN to the binary under test (make build)")
	return ""
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = min(m, x)
	}
	return m
}
