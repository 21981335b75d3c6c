package timeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallStartFolded: a call_start with its end line leaves one event (the
// end line's); an interrupted end shows as a failed call; a start with no
// end line becomes a failed call event and a problem.
func TestCallStartFolded(t *testing.T) {
	dir := t.TempDir()
	audit := strings.Join([]string{
		`{"time":"2026-12-02T08:00:00Z","session_id":"conn-1","kind":"call_start","name":"fx_echo","arguments":{"text":"a"},"ok":true,"error":"","duration_ms":0,"result_preview":"","correlation_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","server":"fx"}`,
		`{"time":"2026-12-02T08:00:00Z","session_id":"conn-1","kind":"tools/call","name":"fx_echo","arguments":{"text":"a"},"ok":true,"error":"","duration_ms":5,"result_preview":"a","correlation_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","server":"fx"}`,
		`{"time":"2026-12-02T08:00:01Z","session_id":"conn-1","kind":"call_start","name":"fx_echo","arguments":{"text":"slow"},"ok":true,"error":"","duration_ms":0,"result_preview":"","correlation_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","server":"fx"}`,
		`{"time":"2026-12-02T08:00:01Z","session_id":"conn-1","kind":"tools/call","name":"fx_echo","arguments":{"text":"slow"},"ok":false,"error":"interrupted: the sidecar stopped during the call","duration_ms":3000,"result_preview":"","correlation_id":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","server":"fx","interrupted":true}`,
		`{"time":"2026-12-02T08:00:02Z","session_id":"conn-1","kind":"call_start","name":"fx_echo","arguments":{"text":"cut"},"ok":true,"error":"","duration_ms":0,"result_preview":"","correlation_id":"cccccccccccccccccccccccccccccccc","server":"fx"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, FileAudit), []byte(audit), 0o600); err != nil {
		t.Fatal(err)
	}
	tl, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	var calls []Event
	for _, e := range tl.Events {
		if e.Kind == KindCallStart {
			t.Errorf("a call_start event is left in the timeline: %+v", e)
		}
		if e.Kind == KindToolCall {
			calls = append(calls, e)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("%d tool call events, want 3: %+v", len(calls), calls)
	}
	if !calls[0].OK || calls[0].Line != 2 {
		t.Errorf("completed call = %+v, want ok, from the end line (2)", calls[0])
	}
	if calls[1].OK || !strings.Contains(calls[1].Summary, "interrupted") {
		t.Errorf("interrupted call = %+v, want failed, saying interrupted", calls[1])
	}
	if calls[2].OK || calls[2].Line != 5 || !strings.Contains(calls[2].Summary, "no end line") {
		t.Errorf("cut-off call = %+v, want failed, from the start line (5), saying no end line", calls[2])
	}
	found := false
	for _, p := range tl.Problems {
		found = found || (p.File == FileAudit && p.Line == 5 && strings.Contains(p.Message, "no end line"))
	}
	if !found {
		t.Errorf("problems = %+v, want one for the call_start at line 5", tl.Problems)
	}
	if s := tl.Stats(); s.ToolCalls != 3 || s.FailedCalls != 2 {
		t.Errorf("stats = %+v, want 3 tool calls, 2 failed", s)
	}
}

// TestParseLineCallStart: the live stream sees a call_start as its own
// event.
func TestParseLineCallStart(t *testing.T) {
	e, err := ParseLine(FileAudit, []byte(`{"time":"2026-12-02T08:00:00Z","kind":"call_start","name":"fx_echo","ok":true,"correlation_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != KindCallStart || e.Summary != "tool call fx_echo started" || e.Source != SourceSidecar {
		t.Errorf("event = %+v, want a sidecar call_start event", e)
	}
}
