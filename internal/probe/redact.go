package probe

import "github.com/mcpsidecar/mcpsidecar/internal/redact"

// redacted replaces a secret value in evidence ([redact.Marker]).
const redacted = redact.Marker

// Redact removes secrets from s ([redact.String]): PEM blocks, values of
// secret-named key/value lines, and known API-token shapes. It runs on
// every summary and evidence string when a result is built, so a secret
// the probe happened to read is never kept, even in memory, and never
// reaches report.json (threat: a probe report shared for comparison leaks
// the key it found).
func Redact(s string) string { return redact.String(s) }
