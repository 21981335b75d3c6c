package sidecar

import (
	"unicode/utf8"

	"github.com/mcpsidecar/mcpsidecar/internal/redact"
)

// MaxPreviewChars bounds the result preview in an audit record.
const MaxPreviewChars = 500

// redacted replaces a secret in an audit record ([redact.Marker]).
const redacted = redact.Marker

// Redact replaces every secret-looking substring of s with [redact.Marker]
// ([redact.String]). Assignments keep their key so the log still says what
// was there. Threat: a tool result or argument carries a key the agent or
// an upstream leaked, and the audit log is copied into the run directory
// the user shares.
func Redact(s string) string { return redact.String(s) }

// previewSlack is how far past the cut redaction still looks, so that a
// secret straddling the cut is recognised whole before it is cut.
const previewSlack = 256

// Preview redacts s and cuts it to at most max characters (runes), ending
// with "…" when cut.
func Preview(s string, max int) string {
	if max < 1 {
		return ""
	}
	s = Redact(cutRunes(s, max+previewSlack))
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return cutRunes(s, max-1) + "…"
}

// cutRunes returns the first n runes of s.
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
