package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/mcpsidecar/mcpsidecar/internal/trace"
)

// HeaderTraceparent is the W3C Trace Context header that carries the
// correlation id in and out of the sidecar.
const HeaderTraceparent = trace.Header

type traceKey struct{}

// withTraceID returns ctx carrying the correlation (trace) id of the call.
func withTraceID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey{}, id)
}

// traceIDFrom returns the correlation id carried by ctx, or "".
func traceIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}

// traceIDFromHeader returns the trace-id of a valid traceparent value, or
// "" when it is absent or malformed: a malformed value is ignored rather
// than echoed (internal/trace has the one rule).
func traceIDFromHeader(v string) string { return trace.ID(v) }

// newTraceID makes a fresh random trace-id.
func newTraceID() string { return trace.NewID() }

// traceparent formats an outgoing traceparent for trace-id id with a new
// span id, sampled.
func traceparent(id string) string { return trace.Parent(id) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go >= 1.24)
	return hex.EncodeToString(b)
}
