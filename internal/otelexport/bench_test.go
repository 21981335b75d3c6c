package otelexport

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// thousandDecisions is the basic fixture run with 1,000 more egress
// decisions, denied, each under the fetch tool call's correlation id.
func thousandDecisions(b *testing.B) *timeline.Timeline {
	b.Helper()
	src := filepath.Join("..", "timeline", "testdata", "runs", "basic")
	dir := filepath.Join(b.TempDir(), "run-bench")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if e.Name() == timeline.FileDecisions {
			start := time.Date(2026, 11, 29, 10, 0, 4, 0, time.UTC)
			for i := range 1000 {
				data = fmt.Appendf(data, `{"time":%q,"client":"172.30.1.3:%d","method":"CONNECT","host":"h%d.exfil.example","port":443,"decision":"deny","reason":"host h%d.exfil.example is not in allowed_domains","duration_ms":0.2,"correlation_id":"d3b07384d113edec49eaa6238ad5ff00","scope":"sidecar/learn/microsoft_docs_fetch"}`+"\n",
					start.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), 40000+i, i, i)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	tl, err := timeline.Build(dir)
	if err != nil {
		b.Fatal(err)
	}
	return tl
}

// BenchmarkExport1000: the export of a run with 1,000 decisions, through
// the real exporters: the OTLP JSON file, and OTLP http/protobuf to a
// loopback receiver that counts the bytes it is sent and answers as a
// collector does.
//
//	go test -run '^$' -bench Export1000 -benchtime 20x ./internal/otelexport/
func BenchmarkExport1000(b *testing.B) {
	tl := thousandDecisions(b)
	b.Run("file", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "run.otlp.json")
		var size int64
		for b.Loop() {
			exp, err := NewExporter(context.Background(), Target{File: path}, os.Getenv)
			if err != nil {
				b.Fatal(err)
			}
			st, err := Export(context.Background(), tl, exp, nil)
			if err != nil {
				b.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			size = fi.Size()
			b.ReportMetric(float64(st.Spans), "spans")
		}
		b.ReportMetric(float64(size), "bytes/export")
	})
	b.Run("http-protobuf", func(b *testing.B) {
		var sent atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			sent.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
		}))
		defer srv.Close()
		none := func(string) string { return "" }
		for b.Loop() {
			exp, err := NewExporter(context.Background(), Target{Endpoint: srv.URL}, none)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Export(context.Background(), tl, exp, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(sent.Load())/float64(b.N), "bytes/export")
	})
}
