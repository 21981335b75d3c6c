//go:build linux

package sidecar

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	mclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mmcp "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// TestInteropMark3labs drives the sidecar with an independent client
// implementation, both on its default (newest) protocol and pinned to an
// initialize-based revision.
func TestInteropMark3labs(t *testing.T) {
	_, upURL := startFake(t, learnfake.Options{})
	ts := startSidecar(t, Config{UpstreamURL: upURL})
	for _, version := range []string{"", "2025-06-18", "2025-03-26"} {
		t.Run("version "+version, func(t *testing.T) {
			runMark3labs(t, ts.URL+MCPPath, version)
		})
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	recs := readAudit(t, ts.AuditPath)
	if len(recs) != 3*5 {
		t.Fatalf("audit has %d records, want 15 (3 clients x (1 read + 4 calls))", len(recs))
	}
	for _, r := range recs {
		if !r.OK {
			t.Errorf("audit record failed: %+v", r)
		}
	}
}

func runMark3labs(t *testing.T, endpoint, version string) {
	ctx := context.Background()
	c, err := mclient.NewStreamableHttpClient(endpoint, transport.WithHTTPHeaders(map[string]string{
		"Traceparent": "00-11111111111111111111111111111111-2222222222222222-01",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mmcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mmcp.Implementation{Name: "mark3labs-interop", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	tools, err := c.ListTools(ctx, mmcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	want := []string{ToolHTMLElementName, learn.ToolCodeSampleSearch, learn.ToolDocsFetch, learn.ToolDocsSearch}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
	res, err := c.ListResources(ctx, mmcp.ListResourcesRequest{})
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != AnswerFormatURI {
		t.Fatalf("ListResources = %+v, %v", res, err)
	}
	read := mmcp.ReadResourceRequest{}
	read.Params.URI = AnswerFormatURI
	rr, err := c.ReadResource(ctx, read)
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("ReadResource = %+v, %v", rr, err)
	}
	if tc, ok := rr.Contents[0].(mmcp.TextResourceContents); !ok || tc.Text != AnswerFormat() {
		t.Errorf("resource content = %#v, want the answer format", rr.Contents[0])
	}
	calls := map[string]map[string]any{
		ToolHTMLElementName:        nil,
		learn.ToolDocsSearch:       {"query": "HttpClient"},
		learn.ToolDocsFetch:        {"url": "https://127.0.0.1/page"},
		learn.ToolCodeSampleSearch: {"query": "HttpClient", "language": "csharp"},
	}
	for name, args := range calls {
		req := mmcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		r, err := c.CallTool(ctx, req)
		if err != nil || r.IsError || len(r.Content) == 0 {
			t.Fatalf("CallTool %s = %+v, %v", name, r, err)
		}
		text, _ := r.Content[0].(mmcp.TextContent)
		if text.Text == "" || (name == ToolHTMLElementName && text.Text != HTMLElementName) || (name != ToolHTMLElementName && !strings.Contains(text.Text, "HttpClient")) {
			t.Errorf("CallTool %s text = %q", name, text.Text)
		}
	}
}
