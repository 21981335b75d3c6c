package otelexport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
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

// BenchmarkForwardMetricsLogs: the export of a spool of 50 relayed
// metrics and 50 relayed logs payloads (as the gateway writes them),
// through each exporter the host has: OTLP/HTTP protobuf and OTLP/gRPC
// to loopback collectors (the gRPC one the collector's proto services),
// and the OTLP/JSON file.
//
//	go test -run '^$' -bench ForwardMetricsLogs -benchtime 20x ./internal/otelexport/
func BenchmarkForwardMetricsLogs(b *testing.B) {
	var lines []string
	for range 50 {
		lines = append(lines, spoolLine(otlpwire.Metrics, spoolMetrics), spoolLine(otlpwire.Logs, spoolLogs))
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, runs.FileAgentTelemetry), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	none := func(string) string { return "" }
	forward := func(b *testing.B, t Target) {
		for b.Loop() {
			st, err := ForwardAgentTelemetry(context.Background(), dir, t, none, nil)
			if err != nil || st.Sent != len(lines) {
				b.Fatalf("sent %d of %d: %v", st.Sent, len(lines), err)
			}
		}
	}
	b.Run("http-protobuf", func(b *testing.B) {
		srv := httptest.NewServer(newCountingCollector())
		defer srv.Close()
		forward(b, Target{Endpoint: srv.URL})
	})
	b.Run("grpc", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		c := &grpcCollector{got: map[string]proto.Message{}}
		srv := grpc.NewServer()
		colmetrics.RegisterMetricsServiceServer(srv, grpcMetrics{c: c})
		collogs.RegisterLogsServiceServer(srv, grpcLogs{c: c})
		go srv.Serve(ln)
		defer srv.Stop()
		forward(b, Target{Endpoint: "http://" + ln.Addr().String(), Protocol: ProtocolGRPC})
	})
	b.Run("file", func(b *testing.B) {
		forward(b, Target{File: filepath.Join(b.TempDir(), "run.otlp.json")})
	})
}
