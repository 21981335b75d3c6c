package learnfake

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
)

func TestFakeServesPublishedToolsAndKnobs(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		wantTools int
		wantText  string
	}{
		{"default", Options{}, 3, "IHttpClientFactory"},
		{"omit", Options{Omit: []string{learn.ToolDocsFetch}}, 2, "IHttpClientFactory"},
		{"huge", Options{HugeResultBytes: 1 << 16, Stateless: true}, 3, strings.Repeat("A", 1<<16)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := New(tc.opts)
			srv := httptest.NewServer(fake.Handler())
			defer srv.Close()
			ctx := context.Background()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != tc.wantTools {
				t.Fatalf("ListTools = %d tools, %v; want %d", len(tools.Tools), err, tc.wantTools)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: learn.ToolDocsSearch, Arguments: map[string]any{"query": "q"}})
			if err != nil {
				t.Fatal(err)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, tc.wantText) {
				t.Errorf("text = %.80q, want %.80q", text, tc.wantText)
			}
			if calls := fake.Calls(); len(calls) != 1 || calls[0].Arguments["query"] != "q" {
				t.Errorf("calls = %+v", calls)
			}
		})
	}
}
