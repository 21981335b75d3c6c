package timeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinCheckLine: the sidecar's pin_check audit line (issue 17) becomes
// an event, a refused server a failed one that says why; neither is a
// problem with the file.
func TestPinCheckLine(t *testing.T) {
	dir := t.TempDir()
	lines := `{"time":"2026-12-02T04:00:00Z","session_id":"connect","kind":"pin_check","name":"docs","arguments":{"url":"https://docs.example.com/mcp"},"ok":false,"error":"tool definitions differ from the pin (on_drift = \"fail\", server refused): server docs: tool search changed (description)","duration_ms":0,"result_preview":"","correlation_id":"0af7651916cd43dd8448eb211c80319c","server":"docs"}
{"time":"2026-12-02T04:00:01Z","session_id":"connect","kind":"pin_check","name":"wiki","arguments":{},"ok":true,"error":"","duration_ms":0,"result_preview":"3 tool definitions match the pin","correlation_id":"0af7651916cd43dd8448eb211c80319d","server":"wiki"}
`
	if err := os.WriteFile(filepath.Join(dir, FileAudit), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	tl, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	for _, e := range tl.Events {
		if e.Kind == KindPinCheck {
			got = append(got, e)
		}
	}
	if len(got) != 2 {
		t.Fatalf("got %d pin_check events, want 2: %+v", len(got), tl.Events)
	}
	if got[0].OK || !strings.Contains(got[0].Summary, "MCP server docs refused: tool definitions differ from the pin") {
		t.Errorf("refused server: %+v", got[0])
	}
	if !got[1].OK || got[1].Summary != "MCP server wiki tool definitions: 3 tool definitions match the pin" {
		t.Errorf("matching server: %+v", got[1])
	}
	for _, p := range tl.Problems {
		if strings.Contains(p.Message, "pin_check") || strings.Contains(p.Message, FileAudit) {
			t.Errorf("problem: %+v", p)
		}
	}
}
