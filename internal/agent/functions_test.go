package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/chatcontract"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// contractRequest is the first request the agent would send with ts.
func contractRequest(t *testing.T, ts *toolset) []byte {
	t.Helper()
	b, err := json.Marshal(openai.ChatCompletionRequest{Model: DefaultModel, Tools: ts.offered, Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: seedPrompt}, {Role: openai.ChatMessageRoleUser, Content: DefaultQuestion}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toolsetAt(t *testing.T, url string) *toolset {
	t.Helper()
	cfg := Config{SidecarURL: url, RequestTimeout: 5 * time.Second}
	s, err := connectSidecar(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts, err := newToolset(context.Background(), s, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// Every tool the real sidecar lists (its own and the upstream's it
// proxies, online and with --no-upstream) becomes a function definition
// the API accepts.
func TestSidecarToolsPassContract(t *testing.T) {
	up := httptest.NewServer(learnfake.New(learnfake.Options{}).Handler())
	t.Cleanup(up.Close)
	for _, offline := range []bool{false, true} {
		audit, err := sidecar.OpenAuditLog(filepath.Join(t.TempDir(), sidecar.AuditFileName))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := sidecar.New(sidecar.Config{UpstreamURL: up.URL + "/mcp", Audit: audit, UpstreamTimeout: 5 * time.Second, NoUpstream: offline})
		if err != nil {
			t.Fatal(err)
		}
		if !offline {
			if _, err := sc.CheckUpstream(context.Background()); err != nil {
				t.Fatalf("CheckUpstream: %v", err)
			}
		}
		side := httptest.NewServer(sc.Handler())
		t.Cleanup(side.Close)
		ts := toolsetAt(t, side.URL+sidecar.MCPPath)
		if len(ts.offered) < 4 {
			t.Errorf("offline=%v: %d tools offered, want the local two, %s and the sidecar's", offline, len(ts.offered), sidecar.ToolHTMLElementName)
		}
		if e := chatcontract.Validate(contractRequest(t, ts)); e != nil {
			t.Errorf("offline=%v: the API would refuse the sidecar's tools: %s (param %v)", offline, e.Message, *e.Param)
		}
	}
}

// MCP tools the API would refuse as they are are repaired: properties
// added, names mapped (and the mapping kept), descriptions bounded.
func TestOfferRepairsTools(t *testing.T) {
	long := strings.Repeat("n", 70)
	_, url := startSidecar(t,
		&mcp.Tool{Name: "learn.fetch", Description: strings.Repeat("é", 2000), InputSchema: map[string]any{"type": "object"}},
		&mcp.Tool{Name: long, InputSchema: map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}},
		&mcp.Tool{Name: "learn_fetch", InputSchema: map[string]any{"type": "object", "properties": map[string]any{}}},
	)
	ts := toolsetAt(t, url)
	if e := chatcontract.Validate(contractRequest(t, ts)); e != nil {
		t.Fatalf("the API would refuse the offer: %s", e.Message)
	}
	byMCP := map[string]string{}
	for offered, f := range ts.remote {
		byMCP[f.tool.Name] = offered
		if got := len([]rune(f.definition().Function.Description)); got > chatcontract.MaxDescription {
			t.Errorf("%s: description of %d characters", offered, got)
		}
	}
	for _, name := range []string{"learn.fetch", long, "learn_fetch"} {
		offered := byMCP[name]
		if !validToolName.MatchString(offered) {
			t.Errorf("%q offered as %q, which the API refuses", name, offered)
		}
		if name != offered && ts.renamed[offered] != name {
			t.Errorf("renamed[%q] = %q, want %q", offered, ts.renamed[offered], name)
		}
	}
	if byMCP["learn.fetch"] == byMCP["learn_fetch"] {
		t.Errorf("two tools share the offered name %q", byMCP["learn.fetch"])
	}
	if byMCP["learn_fetch"] != "learn_fetch" && byMCP["learn.fetch"] != "learn_fetch" {
		t.Errorf("neither tool kept the valid name learn_fetch: %v", byMCP)
	}
}

func TestFunctionSchema(t *testing.T) {
	tests := []struct {
		in     any
		want   string
		closed bool
	}{
		{nil, `{"properties":{},"type":"object"}`, true},
		{map[string]any{"type": "object", "additionalProperties": false}, `{"additionalProperties":false,"properties":{},"type":"object"}`, true},
		{map[string]any{"properties": map[string]any{"q": map[string]any{"type": "string"}}}, `{"properties":{"q":{"type":"string"}},"type":"object"}`, true},
		{map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": true}, `{"additionalProperties":true,"properties":{},"type":"object"}`, false},
	}
	for _, tt := range tests {
		s, err := functionSchema(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(s.raw) != tt.want || s.closed != tt.closed {
			t.Errorf("functionSchema(%v) = %s closed=%v, want %s closed=%v", tt.in, s.raw, s.closed, tt.want, tt.closed)
		}
	}
}

func TestCallArgs(t *testing.T) {
	schema := mustSchema(`{"type":"object","properties":{"query":{"type":"string"},"top":{"type":"integer"},"tags":{"type":["array","null"]}},"required":["query"],"additionalProperties":false}`)
	open := mustSchema(`{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":true}`)
	tests := []struct {
		name        string
		s           toolSchema
		raw         string
		wantArgs    map[string]any
		wantIgnored []string
		wantErr     string
	}{
		{"ok", schema, `{"query":"x","top":3}`, map[string]any{"query": "x", "top": 3.0}, nil, ""},
		{"empty is {}", readFormatSchema, ``, map[string]any{}, nil, ""},
		{"extra keys dropped", schema, `{"query":"x","lang":"cs","answer":1}`, map[string]any{"query": "x"}, []string{"answer", "lang"}, ""},
		{"extra keys kept when the schema allows them", open, `{"q":"x","more":1}`, map[string]any{"q": "x", "more": 1.0}, nil, ""},
		{"null allowed by a type list", schema, `{"query":"x","tags":null}`, map[string]any{"query": "x", "tags": nil}, nil, ""},
		{"missing required", schema, `{"top":1}`, nil, nil, `missing required argument "query"`},
		{"wrong type", schema, `{"query":5}`, nil, nil, `argument "query" must be string, got integer`},
		{"not an integer", schema, `{"query":"x","top":1.5}`, nil, nil, `argument "top" must be integer, got number`},
		{"malformed JSON", schema, `{"query": x`, nil, nil, "not a JSON object"},
		{"an array", schema, `["x"]`, nil, nil, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, ignored, err := callArgs(tt.s, tt.raw)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantArgs, args); diff != "" {
				t.Errorf("args mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantIgnored, ignored); diff != "" {
				t.Errorf("ignored mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The API takes at most 128 tools: the agent's two and 126 of the
// sidecar's; the rest are left out and named.
func TestOfferBoundsToolCount(t *testing.T) {
	var tools []*mcp.Tool
	for i := range 130 {
		tools = append(tools, &mcp.Tool{Name: fmt.Sprintf("t%03d", i)})
	}
	fns, dropped, err := offer(tools, map[string]bool{ToolReadFormat: true, ToolSaveAnswer: true}, chatcontract.MaxTools-2)
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 126 || len(dropped) != 4 || dropped[0] != "t126" {
		t.Errorf("offered %d, dropped %v; want 126 offered and t126..t129 dropped", len(fns), dropped)
	}
}
