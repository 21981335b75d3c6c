package otelexport

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// basicRun is the timeline's own fixture run: the agent's model requests,
// a search tool call with its allowed upstream request, a fetch whose
// egress was denied.
func basicRun(t *testing.T) *timeline.Timeline {
	t.Helper()
	tl, err := timeline.Build(filepath.Join("..", "timeline", "testdata", "runs", "basic"))
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestExportShape: one trace, the run at its root, every request, call
// and decision a span parented as the timeline links them, the model
// span with the GenAI attributes, and the same ids on a second export.
func TestExportShape(t *testing.T) {
	tl := basicRun(t)
	exp := keep{tracetest.NewInMemoryExporter()}
	st, err := Export(context.Background(), tl, exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != st.Spans || st.Spans < 5 {
		t.Fatalf("%d spans exported, stats say %d", len(spans), st.Spans)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != st.TraceID {
			t.Errorf("span %q in trace %s, want %s", s.Name, s.SpanContext.TraceID(), st.TraceID)
		}
		byName[s.Name] = s
	}
	root, ok := byName["mcpsidecar run"]
	if !ok || root.Parent.IsValid() {
		t.Fatalf("no root run span: %v", names(spans))
	}
	search := find(t, spans, "tools/call microsoft_code_sample_search")
	learn := find(t, spans, "egress allow CONNECT learn.microsoft.com")
	if learn.Parent.SpanID() != search.SpanContext.SpanID() {
		t.Errorf("the upstream request is not under its tool call")
	}
	denied := find(t, spans, "egress deny")
	fetch := find(t, spans, "tools/call microsoft_docs_fetch")
	if denied.Parent.SpanID() != fetch.SpanContext.SpanID() || denied.Status.Code.String() != "Error" {
		t.Errorf("the denied request: parent %s status %v, want under the fetch and an error", denied.Parent.SpanID(), denied.Status)
	}
	model := find(t, spans, "chat ")
	attrs := map[string]string{}
	for _, a := range model.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["gen_ai.operation.name"] != "chat" || attrs["gen_ai.request.model"] == "" {
		t.Errorf("model span attributes %v", attrs)
	}
	again := keep{tracetest.NewInMemoryExporter()}
	st2, _ := Export(context.Background(), tl, again, nil)
	if st2.TraceID != st.TraceID || again.GetSpans()[0].SpanContext.SpanID() != spans[0].SpanContext.SpanID() {
		t.Error("a second export of the run made other ids")
	}
}

// keep is the SDK's in-memory exporter, whose spans outlive the shutdown
// Export ends with.
type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

func find(t *testing.T, spans tracetest.SpanStubs, prefix string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			return s
		}
	}
	t.Fatalf("no span %q among %v", prefix, names(spans))
	return tracetest.SpanStub{}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestExportFile: --otlp-file writes OTLP JSON, one TracesData a line,
// holding every span.
func TestExportFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.otlp.json")
	exp, err := NewExporter(context.Background(), Target{File: path}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Export(context.Background(), basicRun(t), exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var td struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						TraceID string `json:"traceId"`
						SpanID  string `json:"spanId"`
						Name    string `json:"name"`
						Kind    int    `json:"kind"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &td); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		for _, rs := range td.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
				for _, sp := range ss.Spans {
					// OTLP/JSON: hex ids, enums as numbers.
					if sp.TraceID != st.TraceID || len(sp.SpanID) != 16 || sp.Kind == 0 {
						t.Errorf("span %q: trace id %q (want %s), span id %q, kind %d", sp.Name, sp.TraceID, st.TraceID, sp.SpanID, sp.Kind)
					}
				}
			}
		}
	}
	if n != st.Spans {
		t.Errorf("%d spans in the file, %d exported", n, st.Spans)
	}
}

// TestNewExporterRefuses: a malformed endpoint, an unknown protocol, and
// no endpoint at all are errors that say which.
func TestNewExporterRefuses(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		t    Target
		want string
	}{
		{Target{Endpoint: "localhost:4318"}, "want a URL"},
		{Target{Endpoint: "ftp://x:1"}, "want a URL"},
		{Target{Endpoint: "http://x:1", Protocol: "thrift"}, `protocol "thrift"`},
		{Target{}, "no OTLP endpoint"},
	} {
		if _, err := NewExporter(context.Background(), tc.t, none); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.t, err, tc.want)
		}
	}
}
