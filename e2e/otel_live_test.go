//go:build docker

package e2e

// The export during a run (issue 33) as the wire shows it: a loopback
// receiver of OTLP http/protobuf (the protocol's own messages, decoded
// with its published protobuf types) notes when each span arrives. Spans
// arrive while the run goes, none twice, and together they are the trace
// `runs export --otlp-file` writes for the same run. TestLiveExportSameTrace
// checks the same against Jaeger.

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver records each span's id, parent and arrival.
type otlpReceiver struct {
	mu      sync.Mutex
	parent  map[string]string
	arrived map[string]time.Time
	dups    []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an ExportTraceServiceRequest", http.StatusBadRequest)
		return
	}
	now := time.Now()
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				id := hex.EncodeToString(sp.SpanId)
				if _, seen := o.parent[id]; seen {
					o.dups = append(o.dups, id+" "+sp.Name)
				}
				o.parent[id], o.arrived[id] = hex.EncodeToString(sp.ParentSpanId), now
			}
		}
	}
	o.mu.Unlock()
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

func TestLiveExportOnTheWire(t *testing.T) {
	NeedDocker(t)
	rec := &otlpReceiver{parent: map[string]string{}, arrived: map[string]time.Time{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := agPrepare(t)
	r := s.runWith(t, "task", "--otlp-endpoint", srv.URL)
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstderr:\n%s", r.err, r.stderr)
	}
	m := exportedTrace.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("the run did not say it exported:\n%s", r.stderr)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	end := fileTime(t, filepath.Join(runDir, "timeline.jsonl"))
	file := filepath.Join(t.TempDir(), "trace.json")
	if out, err := exec.Command(s.bin, "runs", "export", "--otlp-file", file, runDir).CombinedOutput(); err != nil {
		t.Fatalf("runs export: %v\n%s", err, out)
	}
	want := otlpFileSpans(t, file)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, d := range rec.dups {
		t.Errorf("span sent twice: %s", d)
	}
	during := 0
	for id, parent := range want {
		got, ok := rec.parent[id]
		switch {
		case !ok:
			t.Errorf("span %s of the post-run export never arrived", id)
		case got != parent:
			t.Errorf("span %s arrived under %q, the post-run export has %q", id, got, parent)
		}
		if ok && rec.arrived[id].Before(end) {
			during++
		}
	}
	if len(rec.parent) != len(want) {
		t.Errorf("%d spans arrived, the post-run export has %d", len(rec.parent), len(want))
	}
	if during == 0 || m[3] == "0" {
		t.Errorf("no span arrived before the run's end (%s said %s during the run)", m[0], m[3])
	}
	t.Logf("%d spans, %d arrived before the run's end (the run said %s during the run)", len(want), during, m[3])
}
