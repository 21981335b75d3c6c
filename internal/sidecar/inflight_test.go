//go:build linux

package sidecar

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestInflightAbandon: a call whose handler has not returned when
// shutdown gives up gets its interrupted end line from shutdown, and the
// handler's late return writes nothing more.
func TestInflightAbandon(t *testing.T) {
	var buf bytes.Buffer
	audit := NewAuditLog(&buf)
	var calls inflightCalls
	start := time.Now()
	rec := Record{Time: timestamp(start), Kind: KindToolCall, Name: "slow", CorrelationID: "0af7651916cd43dd8448eb211c80319c", Server: "fx"}
	ctx, call, err := calls.begin(context.Background(), audit, rec, start)
	if err != nil {
		t.Fatal(err)
	}
	calls.stop()
	if ctx.Err() == nil {
		t.Fatal("stop did not cancel the call's context")
	}
	if n := calls.abandon(audit, start.Add(time.Second)); n != 1 {
		t.Fatalf("abandon = %d, want 1", n)
	}
	calls.finish(call, func(bool) { t.Error("the handler's late return writes a second end line") })
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("audit has %d lines, want 2:\n%s", len(lines), buf.String())
	}
	s, e := decodeRecord(t, 1, []byte(lines[0])), decodeRecord(t, 2, []byte(lines[1]))
	if s.Kind != KindCallStart || e.Kind != KindToolCall || !e.Interrupted || e.OK || e.DurationMS != 1000 {
		t.Errorf("lines = %+v, %+v; want call_start, then an interrupted tools/call of 1000 ms", s, e)
	}
}

// TestInflightBeginWhileStopping: a call that arrives once the sidecar is
// stopping is recorded and runs under a cancelled context.
func TestInflightBeginWhileStopping(t *testing.T) {
	var buf bytes.Buffer
	var calls inflightCalls
	calls.stop()
	ctx, call, err := calls.begin(context.Background(), NewAuditLog(&buf), Record{Kind: KindToolCall, Name: "x", CorrelationID: "0af7651916cd43dd8448eb211c80319c", Time: timestamp(time.Now())}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Error("a call begun while stopping runs under a live context")
	}
	wrote := false
	calls.finish(call, func(stopping bool) {
		wrote = true
		if !stopping {
			t.Error("finish says the sidecar is not stopping")
		}
	})
	if !wrote {
		t.Error("finish did not have the end line written")
	}
	if !strings.Contains(buf.String(), `"kind":"call_start"`) {
		t.Errorf("no start line: %s", buf.String())
	}
}
