package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// HeaderTraceparent is the W3C Trace Context header that carries the
// correlation id in and out of the sidecar.
const HeaderTraceparent = "Traceparent"

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

// traceIDFromHeader returns the trace-id of a valid version-00 traceparent
// value, or "" when the value is absent or malformed. A malformed value is
// ignored rather than echoed: the id ends up in logs and upstream headers, so
// only 32 lower-case hex digits are ever accepted (no header injection).
func traceIDFromHeader(v string) string {
	parts := strings.Split(strings.TrimSpace(v), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" {
		return ""
	}
	id, span := parts[1], parts[2]
	if !isLowerHex(parts[0]) || !isLowerHex(id) || len(id) != 32 || !isLowerHex(span) || len(span) != 16 {
		return ""
	}
	if id == strings.Repeat("0", 32) || span == strings.Repeat("0", 16) {
		return ""
	}
	return id
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

// newTraceID makes a fresh random trace-id.
func newTraceID() string { return randomHex(16) }

// traceparent formats an outgoing traceparent for trace-id id with a new
// span id, sampled.
func traceparent(id string) string {
	return "00-" + id + "-" + randomHex(8) + "-01"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go >= 1.24)
	return hex.EncodeToString(b)
}
