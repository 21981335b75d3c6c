package timeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// genRun writes a run directory with n audit lines and n decision lines:
// every call causes one allowed request, every tenth decision is a denial
// with no correlation id, and the lines are written out of order.
func genRun(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	meta := fmt.Sprintf(`{"schema":"mcpsidecar.run/v1","run_id":"bench","command":"run","started":%q,"finished":%q,
"networks":[{"name":"bench-internal","internal":true},{"name":"bench-egress","internal":false}],
"containers":[{"role":"gateway","name":"bench-gateway","exit_code":0,"networks":["bench-egress","bench-internal"],"aliases":["egress-gateway"]},
{"role":"sidecar","name":"bench-sidecar","exit_code":0,"networks":["bench-internal"],"aliases":["mcp-sidecar"]},
{"role":"agent","name":"bench-agent","exit_code":0,"networks":["bench-internal"]}],
"phases":[{"name":"run agent","start":%q,"duration_ms":%d,"ok":true}],"verdict":{"ok":true,"checks":[]},"exit_code":0}`,
		start.Format(time.RFC3339Nano), start.Add(time.Duration(n)*time.Millisecond).Format(time.RFC3339Nano),
		start.Format(time.RFC3339Nano), n)
	if err := os.WriteFile(filepath.Join(dir, FileRunMetadata), []byte(meta), 0o644); err != nil {
		tb.Fatal(err)
	}
	// The harness's record of the sidecar's address: the decisions below
	// come from it, so they hang from its calls.
	started := `[{"role":"sidecar","ip_addresses":{"bench-internal":"172.30.0.3"},"ok":true}]`
	if err := os.WriteFile(filepath.Join(dir, runs.StartResultsFile("sidecar")), []byte(started), 0o644); err != nil {
		tb.Fatal(err)
	}
	writeLines(tb, filepath.Join(dir, FileAudit), n, func(i int) any {
		return auditLine{Time: start.Add(time.Duration(n-i) * time.Millisecond), SessionID: "S1", Kind: "tools/call",
			Name: "microsoft_docs_search", Arguments: json.RawMessage(`{"query":"retry policy"}`),
			DurationMS: 12.5, ResultPreview: "a preview of the result, a few hundred characters long in practice",
			CorrelationID: fmt.Sprintf("%032x", i)}
	})
	writeLines(tb, filepath.Join(dir, FileDecisions), n, func(i int) any {
		d := decisionLine{Time: start.Add(time.Duration(n-i)*time.Millisecond - time.Millisecond/2), Client: "172.30.0.3:40000",
			Method: "CONNECT", Host: "learn.microsoft.com", Port: "443", ResolvedIP: "13.107.213.70", Decision: "allow",
			Rule: ".microsoft.com", BytesUp: 1800, BytesDown: 30000, DurationMS: 10, CorrelationID: fmt.Sprintf("%032x", i)}
		if i%10 == 0 {
			d.Host, d.Decision, d.Rule, d.Reason, d.CorrelationID = "exfil.example", "deny", "", "host not in allowlist", ""
		}
		return d
	})
	return dir
}

func writeLines(tb testing.TB, path string, n int, line func(i int) any) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range n {
		if err := enc.Encode(line(i)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkWrite10k measures the whole host-side step for a run with
// 10,000 audit lines and 10,000 decision lines: read, join, and write
// timeline.jsonl and report.html.
func BenchmarkWrite10k(b *testing.B) {
	dir := genRun(b, 10000)
	// The machine is shared: CPU time (user+system) per write is reported
	// beside wall time, as it does not grow with other tenants' load.
	cpu0 := cpuTime(b)
	n := 0
	for b.Loop() {
		if err := Write(dir); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(n), "cpu-ms/op")
	for _, name := range []string{FileTimeline, FileReport} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
			b.ReportMetric(float64(fi.Size())/(1<<20), name+"-MiB")
		}
	}
}

func TestGeneratedRunJoinsEveryCall(t *testing.T) {
	tl, err := Build(genRun(t, 200))
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Problems) != 0 {
		t.Fatalf("problems: %v", tl.Problems)
	}
	s := tl.Stats()
	if s.ToolCalls != 200 || s.Allowed != 180 || s.Denied != 20 || s.Unlinked != 20 {
		t.Errorf("stats %+v, want 200 calls, 180 allowed (all linked), 20 denied unlinked", s)
	}
}
