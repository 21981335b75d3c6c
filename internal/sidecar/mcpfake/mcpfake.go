// Package mcpfake is a generic fake MCP server for tests: a real go-sdk
// MCP server (streamable HTTP) whose tools are given as data, each
// answering with a text that names the server, the tool and the
// arguments. It can require a bearer token (and refuses a request
// without it, as a real authenticated server does, with 401), and it
// records every call with the headers it arrived with, so tests can see
// which credential and which scope reached it. It serves only what a test
// mounts it on: it must never dial out.
package mcpfake

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is one tool the fake lists.
type Tool struct {
	Name        string
	Description string
	// Schema is the input schema (a JSON object schema).
	Schema map[string]any
}

// Options configure the fake.
type Options struct {
	Name  string // server name, in every answer
	Tools []Tool
	// BearerToken, when set, must arrive as "Authorization: Bearer TOKEN".
	BearerToken string
}

// Call is one tools/call the fake served.
type Call struct {
	Tool      string
	Arguments map[string]any
	Header    http.Header
}

// Server is the fake.
type Server struct {
	opts    Options
	handler http.Handler

	mu      sync.Mutex
	calls   []Call
	refused int
	headers []http.Header
}

// New builds a fake server.
func New(opts Options) *Server {
	s := &Server{opts: opts}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpfake-" + opts.Name, Version: "1"}, nil)
	for _, t := range opts.Tools {
		schema := t.Schema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: schema}, s.answer(t.Name))
	}
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true})
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		if !s.authorized(r) {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpfake"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		mh.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), headerKey{}, r.Header.Clone())))
	})
	return s
}

type headerKey struct{}

func (s *Server) authorized(r *http.Request) bool {
	if s.opts.BearerToken == "" {
		return true
	}
	want := "Bearer " + s.opts.BearerToken
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) == 1
}

func (s *Server) answer(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &args)
		hdr, _ := ctx.Value(headerKey{}).(http.Header)
		if req.Extra != nil && req.Extra.Header != nil {
			hdr = req.Extra.Header
		}
		s.mu.Lock()
		s.calls = append(s.calls, Call{Tool: tool, Arguments: args, Header: hdr})
		s.mu.Unlock()
		b, _ := json.Marshal(args)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s/%s %s", s.opts.Name, tool, b)}}}, nil
	}
}

// Handler serves MCP on any path.
func (s *Server) Handler() http.Handler { return s.handler }

// Calls returns the calls served so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Refused counts requests refused for a missing or wrong token.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Headers returns the headers of every request received.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}
