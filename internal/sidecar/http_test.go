//go:build linux

package sidecar

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

func TestHealthz(t *testing.T) {
	ts := startSidecar(t, Config{UpstreamURL: "http://127.0.0.1:1/mcp"})
	resp, err := http.Get(ts.URL + HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("GET /healthz = %d %q, want 200 ok", resp.StatusCode, body)
	}
}

// TestServeHTTP exercises every tool and the resource over real HTTP on
// loopback, with the fake upstream reached directly, and checks the audit
// log line by line.
func TestServeHTTP(t *testing.T) {
	fake, upURL := startFake(t, learnfake.Options{})
	ts := startSidecar(t, Config{UpstreamURL: upURL})
	const trace = "0af7651916cd43dd8448eb211c80319c"
	cs := connect(t, ts.URL, "00-"+trace+"-b7ad6b7169203331-01")

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	wantNames := []string{ToolHTMLElementName, learn.ToolCodeSampleSearch, learn.ToolDocsFetch, learn.ToolDocsSearch}
	if diff := cmp.Diff(wantNames, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}

	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: AnswerFormatURI})
	if err != nil {
		t.Fatal(err)
	}
	if got := rr.Contents[0].Text; got != AnswerFormat() || rr.Contents[0].MIMEType != "text/markdown" {
		t.Errorf("resource = %q (%s), want the answer format", got[:min(len(got), 40)], rr.Contents[0].MIMEType)
	}

	calls := []struct {
		name string
		args map[string]any
		want string
	}{
		{ToolHTMLElementName, map[string]any{}, HTMLElementName},
		{learn.ToolDocsSearch, map[string]any{"query": "HttpClient"}, learnfake.Canned(learn.ToolDocsSearch, map[string]any{"query": "HttpClient"})},
		{learn.ToolDocsFetch, map[string]any{"url": "https://127.0.0.1/dotnet/page"}, learnfake.Canned(learn.ToolDocsFetch, map[string]any{"url": "https://127.0.0.1/dotnet/page"})},
		{learn.ToolCodeSampleSearch, map[string]any{"query": "HttpClient", "language": "csharp"}, learnfake.Canned(learn.ToolCodeSampleSearch, map[string]any{"query": "HttpClient", "language": "csharp"})},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			got, isErr := callText(t, cs, c.name, c.args)
			if isErr || got != c.want {
				t.Fatalf("%s = %q (isError %v), want %q", c.name, got, isErr, c.want)
			}
		})
	}
	if n := len(fake.Calls()); n != 3 {
		t.Errorf("upstream saw %d calls, want 3", n)
	}
	for _, c := range fake.Calls() {
		if traceIDFromHeader(c.Traceparent) != trace {
			t.Errorf("upstream call %s carried traceparent %q, want trace-id %s", c.Tool, c.Traceparent, trace)
		}
	}

	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	recs := readAudit(t, ts.AuditPath)
	want := []Record{
		{Kind: KindResourceRead, Name: AnswerFormatURI, Arguments: []byte(`{"uri":"` + AnswerFormatURI + `"}`), OK: true, ResultPreview: Preview(AnswerFormat(), MaxPreviewChars), CorrelationID: trace},
	}
	for _, c := range calls {
		server := learnServer // each proxied call names its server; local tools none
		if c.name == ToolHTMLElementName {
			server = ""
		}
		want = append(want, Record{Kind: KindToolCall, Name: c.name, Arguments: mustMarshal(c.args), OK: true, ResultPreview: Preview(c.want, MaxPreviewChars), CorrelationID: trace, Server: server})
	}
	opts := cmpopts.IgnoreFields(Record{}, "Time", "DurationMS", "SessionID")
	if diff := cmp.Diff(want, recs, opts, cmp.Transformer("raw", func(r []byte) string { return string(r) })); diff != "" {
		t.Errorf("audit mismatch (-want +got):\n%s", diff)
	}
	for _, r := range recs {
		if !strings.HasPrefix(r.SessionID, "conn-") {
			t.Errorf("session_id = %q, want the connection id", r.SessionID)
		}
	}
}

// TestSessionIDNotSpoofable: a client cannot choose the audit session id.
func TestSessionIDNotSpoofable(t *testing.T) {
	ts := startSidecar(t, Config{UpstreamURL: "http://127.0.0.1:1/mcp"})
	status, body := postRaw(t, ts.URL, call(1, `{"name":"get_html_element_name"}`),
		map[string]string{"Mcp-Session-Id": "victim", headerSession: "victim"})
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	recs := readAudit(t, ts.AuditPath)
	if len(recs) != 1 || !strings.HasPrefix(recs[0].SessionID, "conn-") {
		t.Fatalf("audit = %+v, want one record with the connection's session id", recs)
	}
}
