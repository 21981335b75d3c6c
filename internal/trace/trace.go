// Package trace is the sandbox's one rule for the W3C Trace Context
// header that carries a run's correlation id from the agent through the
// sidecar and the gateway into each role's records. The agent makes the
// ids ([NewID], [Parent]); the sidecar and the gateway read them ([ID]).
//
// The rule is the W3C's, strictly: version 2 hex digits and not "ff", a
// 32-digit trace-id and a 16-digit parent-id, neither all zero, 2 digits
// of flags, every digit lower-case hex. An upper-case value is invalid
// (the spec's HEXDIGLC) and ignored like any other malformed one: the id
// ends up in logs and upstream headers, so nothing else is ever echoed.
package trace

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// Header is the W3C Trace Context header (canonical form).
const Header = "Traceparent"

// NewID returns a fresh trace-id: 32 lower-case hex digits, never all zero.
func NewID() string {
	var b [16]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
		if b != ([16]byte{}) {
			return hex.EncodeToString(b[:])
		}
	}
}

// Parent formats a version-00, sampled traceparent for trace-id id with a
// fresh parent-id (never all zero).
func Parent(id string) string {
	var span [8]byte
	_, _ = rand.Read(span[:])
	if span == ([8]byte{}) {
		span[7] = 1
	}
	return "00-" + id + "-" + hex.EncodeToString(span[:]) + "-01"
}

// ID returns the trace-id of a valid traceparent value, or "" when v is
// empty or malformed (see the package comment for the rule).
func ID(v string) string {
	parts := strings.Split(strings.TrimSpace(v), "-")
	if len(parts) < 4 || parts[0] == "ff" {
		return ""
	}
	version, id, span, flags := parts[0], parts[1], parts[2], parts[3]
	if !lowerHex(version, 2) || !lowerHex(id, 32) || !lowerHex(span, 16) || !lowerHex(flags, 2) {
		return ""
	}
	if id == strings.Repeat("0", 32) || span == strings.Repeat("0", 16) {
		return ""
	}
	return id
}

// FirstID is ID of the first of a request's traceparent values: the spec
// says a request carries one.
func FirstID(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return ID(values[0])
}

func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
