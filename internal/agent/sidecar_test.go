package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Canned sidecar content for the tests.
const (
	testFormat = "# Answer format\n\nDirect answer first, then a short C# sample, then the Learn link.\n"
	testSample = "Sample: services.AddHttpClient(); // https://learn.microsoft.com/dotnet/core/extensions/httpclient-factory"
)

// fakeSidecar is a small go-sdk MCP server with the sidecar's surface the
// agent uses; it records the traceparent of each call it receives.
type fakeSidecar struct {
	mu    sync.Mutex
	calls []sidecarCall
}

type sidecarCall struct {
	Method, Name, Traceparent string
	Arguments                 string
}

type searchArgs struct {
	Query    string `json:"query"`
	Language string `json:"language,omitempty"`
}

// startSidecar serves the fake sidecar on loopback and returns its MCP URL;
// extra tools, when given, are listed too (they answer "ok").
func startSidecar(t testing.TB, extra ...*mcp.Tool) (*fakeSidecar, string) {
	t.Helper()
	f := &fakeSidecar{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake-sidecar", Version: "1"}, nil)
	srv.AddResource(&mcp.Resource{URI: AnswerFormatURI, Name: "answer-format", MIMEType: "text/markdown"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: AnswerFormatURI, MIMEType: "text/markdown", Text: testFormat}}}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolCodeSampleSearch, Description: "search code samples"},
		func(context.Context, *mcp.CallToolRequest, searchArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: testSample}}}, nil, nil
		})
	for _, tool := range extra {
		srv.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	}
	srv.AddReceivingMiddleware(f.record)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return f, ts.URL + "/mcp"
}

func (f *fakeSidecar) record(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c := sidecarCall{Method: method}
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			c.Name, c.Arguments = r.Params.Name, string(r.Params.Arguments)
		case *mcp.ReadResourceRequest:
			c.Name = r.Params.URI
		default:
			return next(ctx, method, req)
		}
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			c.Traceparent = ex.Header.Get("Traceparent")
		}
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		return next(ctx, method, req)
	}
}

func (f *fakeSidecar) Calls() []sidecarCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sidecarCall(nil), f.calls...)
}
