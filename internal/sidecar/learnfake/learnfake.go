// Package learnfake is a fake Microsoft Learn MCP server for tests: a real
// go-sdk MCP server (streamable HTTP) that exposes the three Learn tools with
// the published input schemas ([learn.Tools]) and returns canned results in
// the shapes the real server uses. Knobs simulate a slow upstream, schema
// drift, a missing tool and a malicious huge result; every call is recorded
// with the HTTP headers it arrived with so tests can check correlation ids.
// It serves only what a test mounts it on: it must never dial out.
package learnfake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
)

// Options tunes the fake. The zero value behaves like the real server.
type Options struct {
	// Delay holds every tools/call for this long (or until the request is
	// cancelled), to exercise caller timeouts.
	Delay time.Duration
	// HugeResultBytes, when > 0, makes every tools/call answer with a text
	// result of this many bytes: a malicious or broken upstream.
	HugeResultBytes int
	// Omit lists published tools the fake leaves out of tools/list.
	Omit []string
	// Drift replaces the advertised definition of a published tool (keyed by
	// name), to simulate the upstream changing a schema.
	Drift map[string]learn.Tool
	// Stateless serves without Mcp-Session-Id. The real server is stateful.
	Stateless bool
}

// Call is one tools/call the fake received.
type Call struct {
	Tool        string
	Arguments   map[string]any
	Traceparent string
	Header      http.Header
}

// Server is the fake upstream. Mount [Server.Handler] on any path.
type Server struct {
	opts    Options
	handler http.Handler

	mu    sync.Mutex
	calls []Call
}

// New builds a fake Learn server.
func New(opts Options) *Server {
	s := &Server{opts: opts}
	srv := mcp.NewServer(&mcp.Implementation{Name: "learnfake", Version: "1.0.0"}, nil)
	for _, t := range learn.Tools() {
		if slices.Contains(opts.Omit, t.Name) {
			continue
		}
		advertised := t
		if d, ok := opts.Drift[t.Name]; ok {
			advertised = d
			advertised.Name = t.Name
		}
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: advertised.Description, InputSchema: advertised.Schema()}, s.toolHandler(t.Name))
	}
	srv.AddReceivingMiddleware(s.record)
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		// The fake runs on loopback behind a test proxy whose Host header is
		// not "localhost"; the rebinding guard would refuse those requests.
		&mcp.StreamableHTTPOptions{Stateless: opts.Stateless, DisableLocalhostProtection: true})
	return s
}

// Handler serves the MCP endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// Calls returns the tools/call requests received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *Server) record(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.CallToolRequest); ok {
			c := Call{Tool: r.Params.Name}
			_ = json.Unmarshal(r.Params.Arguments, &c.Arguments)
			if ex := r.GetExtra(); ex != nil && ex.Header != nil {
				c.Header = ex.Header.Clone()
				c.Traceparent = ex.Header.Get("Traceparent")
			}
			s.mu.Lock()
			s.calls = append(s.calls, c)
			s.mu.Unlock()
		}
		return next(ctx, method, req)
	}
}

func (s *Server) toolHandler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if s.opts.Delay > 0 {
			select {
			case <-time.After(s.opts.Delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var args map[string]any
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, fmt.Errorf("decoding arguments: %w", err)
		}
		text := Canned(name, args)
		if s.opts.HugeResultBytes > 0 {
			text = strings.Repeat("A", s.opts.HugeResultBytes)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

// Canned returns the fake's answer to a call, in the shape the real server
// uses: JSON with a "results" array for the two searches, Markdown for fetch.
func Canned(tool string, args map[string]any) string {
	str := func(k string) string { v, _ := args[k].(string); return v }
	switch tool {
	case learn.ToolDocsSearch:
		return mustJSON(map[string]any{"results": []map[string]string{{
			"title":      "Make HTTP requests with the HttpClient class",
			"content":    "Use IHttpClientFactory to create HttpClient instances (query: " + str("query") + ").",
			"contentUrl": "https://learn.microsoft.com/dotnet/fundamentals/networking/http/httpclient",
		}}})
	case learn.ToolDocsFetch:
		return "# Fetched page\n\nSource: " + str("url") + "\n\nUse `IHttpClientFactory` to obtain `HttpClient` instances.\n"
	case learn.ToolCodeSampleSearch:
		return mustJSON(map[string]any{"results": []map[string]string{{
			"description": "Register and inject IHttpClientFactory\nlanguage: " + str("language"),
			"codeSnippet": "builder.Services.AddHttpClient();\n// inject IHttpClientFactory and call CreateClient()",
			"language":    firstNonEmpty(str("language"), "csharp"),
			"link":        "https://learn.microsoft.com/dotnet/core/extensions/httpclient-factory",
		}}})
	}
	return ""
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // canned values always marshal
	}
	return string(b)
}
