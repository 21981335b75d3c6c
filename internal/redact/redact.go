// Package redact is the one home of the sandbox's redaction: what a
// secret looks like in text, and how a known secret value is removed.
// Threat: a key the workload, an upstream or a probe came across reaches
// an artifact the user shares (the sidecar's audit log, the probe's
// report, the run directory).
//
// It has two layers. [String] removes what looks like a credential
// (private-key and certificate blocks, known token shapes, values of
// secret-named assignments and lines) and writes [Marker] in its place;
// the sidecar runs it on every audit preview and the probe on every
// result. [Values] removes secret values the host knows (a forwarded API
// key), and [SecretName] says which host variables hold one; the host
// runs it on every file it writes in the run directory.
//
// It imports only the standard library, so roles and host alike may use
// it; it reads nothing and writes nothing.
package redact

import (
	"regexp"
	"strings"
)

// Marker replaces what [String] removes.
const Marker = "[REDACTED]"

// pattern is one kind of credential. The regexp runs only when one of its
// lower-case triggers occurs in the text: most text holds no secret, and
// running every regexp over every audit preview would dominate its cost.
type pattern struct {
	re       *regexp.Regexp
	triggers []string
	// keep is the replacement's prefix: the submatches (key and
	// separator) an assignment keeps so the text still says what was there.
	keep string
}

func (p pattern) apply(s, lower string) string {
	if !containsAny(lower, p.triggers) {
		return s
	}
	return p.re.ReplaceAllString(s, p.keep+Marker)
}

// patterns run in order: whole blocks first, then whole lines, so a key
// inside a redacted line is not also reported as a token shape.
var patterns = []pattern{
	// PEM blocks (private keys, certificates with keys), also with escaped
	// newlines, of any type; an unterminated block is cut to the end of
	// the text (the sidecar's rule; the probe's matched only terminated
	// PRIVATE KEY blocks).
	{re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)`), triggers: []string{"-----begin "}},
	// A line whose key names a secret: keep the key and separator, drop
	// the rest of the line (the probe's rule; prefix characters as its
	// seed: [A-Z0-9_(). -]).
	{re: regexp.MustCompile(`(?im)^([A-Z0-9_(). -]*(?:API KEY|APIKEY|API_KEY|API-KEY|KEY|TOKEN|SECRET|PASSWORD|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)[A-Z0-9_(). -]*?[ \t]*[=:][ \t]*)[^\r\n]+`),
		triggers: []string{"key", "token", "secret", "pass", "credential", "auth", "cookie", "session", "private"}, keep: "${1}"},
	// AWS secret keys written as assignments anywhere in a line.
	{re: regexp.MustCompile(`(?i)(aws_secret_access_key|secret_access_key)(["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}`),
		triggers: []string{"secret_access_key"}, keep: "${1}${2}"},
	// Bearer tokens in Authorization-style text.
	{re: regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*`), triggers: []string{"bearer"}},
	// Generic key=value secrets anywhere in a line, JSON included.
	{re: regexp.MustCompile(`(?i)\b(api[_-]?key|access[_-]?token|secret|password|passwd)(["']?\s*[:=]\s*["']?)[^\s"',;]{6,}`),
		triggers: []string{"api_key", "api-key", "apikey", "access_token", "access-token", "accesstoken", "secret", "passw"}, keep: "${1}${2}"},
}

// String removes every secret-looking part of s: PEM blocks, secret-named
// lines and assignments, bearer tokens and the [Tokens] shapes, each
// replaced with [Marker]. An assignment keeps its key.
func String(s string) string {
	if s == "" {
		return s
	}
	lower := strings.ToLower(s)
	for _, p := range patterns {
		if t := p.apply(s, lower); t != s {
			s, lower = t, strings.ToLower(t)
		}
	}
	for _, p := range tokenPatterns {
		if t := p.apply(s, lower); t != s {
			s, lower = t, strings.ToLower(t)
		}
	}
	return s
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
