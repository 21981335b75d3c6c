//go:build linux

package sidecar

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// rpcReply is a JSON-RPC response as the tests read it.
type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestBadInput sends malformed and hostile requests over raw HTTP. Each must
// come back as an MCP error (a JSON-RPC error or a tool result with
// isError) and each must be recorded exactly once in the audit log.
func TestBadInput(t *testing.T) {
	_, upURL := startFake(t, learnfake.Options{})
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantErr    string // in the JSON-RPC error message or the tool error text
		wantKind   string
		wantName   string
		hdr        map[string]string
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":"tools/call",`, 400, "parse error", KindInvalid, "", nil},
		{"not JSON-RPC at all", `hello`, 400, "parse error", KindInvalid, "", nil},
		{"unknown tool", call(2, `{"name":"rm_rf","arguments":{}}`), 200, `unknown tool "rm_rf"`, KindToolCall, "rm_rf", nil},
		{"unknown resource", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`, 200, "not found", KindResourceRead, "file:///etc/passwd", nil},
		{"wrong argument type", call(4, `{"name":"microsoft_docs_search","arguments":{"query":5}}`), 200, "validating", KindToolCall, "microsoft_docs_search", nil},
		{"missing required argument", call(5, `{"name":"microsoft_code_sample_search","arguments":{"language":"csharp"}}`), 200, "validating", KindToolCall, "microsoft_code_sample_search", nil},
		{"params of the wrong type", call(6, `{"name":5}`), 200, "invalid params", KindToolCall, "5", nil},
		{"params missing", `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, 200, "requires \"params\"", KindToolCall, "", nil},
		{"call without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_html_element_name"}}`, 400, "must carry an id", KindToolCall, "get_html_element_name", nil},
		{"fetch URL on another host", call(8, `{"name":"microsoft_docs_fetch","arguments":{"url":"https://attacker.example/steal?d=1"}}`), 200, "only pages on 127.0.0.1", KindToolCall, "microsoft_docs_fetch", nil},
		{"fetch URL over http", call(9, `{"name":"microsoft_docs_fetch","arguments":{"url":"http://127.0.0.1/x"}}`), 200, "only https", KindToolCall, "microsoft_docs_fetch", nil},
		{"unsupported protocol version", call(11, `{"name":"get_html_element_name"}`), 400, "refused by the MCP transport before dispatch (HTTP 400)", KindToolCall, "get_html_element_name",
			map[string]string{"Mcp-Protocol-Version": "2024-01-01"}},
		{"oversized body", call(10, `{"name":"microsoft_docs_search","arguments":{"query":"`+strings.Repeat("a", 70<<10)+`"}}`), 413, "exceeds 65536 bytes", KindInvalid, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := startSidecar(t, Config{UpstreamURL: upURL, MaxBodyBytes: 64 << 10})
			status, body := postRaw(t, ts.URL, tc.body, tc.hdr)
			if status != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", status, tc.wantStatus, body)
			}
			if tc.hdr == nil { // the SDK's own refusals are plain text
				if msg := errorOf(t, body); !strings.Contains(msg, tc.wantErr) {
					t.Fatalf("error = %q, want one containing %q", msg, tc.wantErr)
				}
			}
			if err := ts.stop(); err != nil {
				t.Fatal(err)
			}
			recs := readAudit(t, ts.AuditPath)
			if len(recs) != 1 {
				t.Fatalf("audit has %d records, want 1: %+v", len(recs), recs)
			}
			r := recs[0]
			if r.OK || r.Kind != tc.wantKind || r.Name != tc.wantName || !strings.Contains(r.Error, tc.wantErr) {
				t.Errorf("audit = %+v, want a failed %s %q record with %q", r, tc.wantKind, tc.wantName, tc.wantErr)
			}
		})
	}
}

func call(id int, params string) string {
	b, _ := json.Marshal(id)
	return `{"jsonrpc":"2.0","id":` + string(b) + `,"method":"tools/call","params":` + params + `}`
}

// errorOf returns the JSON-RPC error message or the tool error text of a
// response body (JSON or a single SSE event); it fails if there is neither.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	if i := strings.Index(body, "data: "); i >= 0 {
		body = strings.TrimSpace(strings.SplitN(body[i+len("data: "):], "\n", 2)[0])
	}
	var r rpcReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("response is not JSON-RPC: %v: %s", err, body)
	}
	switch {
	case r.Error != nil:
		return r.Error.Message
	case r.Result != nil && r.Result.IsError && len(r.Result.Content) > 0:
		return r.Result.Content[0].Text
	}
	t.Fatalf("response is not an error: %s", body)
	return ""
}
