package sidecar

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxPreviewChars bounds the result preview in an audit record.
const MaxPreviewChars = 500

const redacted = "[REDACTED]"

// secretPattern is one kind of credential. The regexp only runs when one of
// its lower-case triggers occurs in the text: most previews hold no secret,
// and running every regexp over every preview would dominate the audit cost.
type secretPattern struct {
	re       *regexp.Regexp
	triggers []string
	keepKey  bool // the match is key, separator, value: keep the first two
}

// secretPatterns match credentials that must never reach the audit log: a
// tool result or argument may carry a key the agent or an upstream leaked,
// and the audit log is copied into the run directory the user shares.
var secretPatterns = []secretPattern{
	// PEM blocks (private keys, certificates with keys), also with escaped
	// newlines; an unterminated block is cut to the end of the text.
	{re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)`), triggers: []string{"-----begin "}},
	// OpenAI-style and Anthropic-style API keys.
	{re: regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`), triggers: []string{"sk-"}},
	// GitHub tokens: classic prefixes and fine-grained PATs.
	{re: regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), triggers: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	// AWS access key ids.
	{re: regexp.MustCompile(`\b(AKIA|ASIA)[A-Z0-9]{16}\b`), triggers: []string{"akia", "asia"}},
	// AWS secret keys written as assignments.
	{re: regexp.MustCompile(`(?i)(aws_secret_access_key|secret_access_key)(["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}`), triggers: []string{"secret_access_key"}, keepKey: true},
	// Bearer tokens in Authorization-style text.
	{re: regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*`), triggers: []string{"bearer"}},
	// Slack tokens and Google API keys.
	{re: regexp.MustCompile(`\bxox[baprs]-[A-Za-z0-9\-]{10,}`), triggers: []string{"xox"}},
	{re: regexp.MustCompile(`\bAIza[0-9A-Za-z\-_]{35}\b`), triggers: []string{"aiza"}},
	// JSON Web Tokens.
	{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`), triggers: []string{"eyj"}},
	// Generic key=value secrets.
	{re: regexp.MustCompile(`(?i)\b(api[_-]?key|access[_-]?token|secret|password|passwd)(["']?\s*[:=]\s*["']?)[^\s"',;]{6,}`),
		triggers: []string{"api_key", "api-key", "apikey", "access_token", "access-token", "accesstoken", "secret", "passw"}, keepKey: true},
}

// Redact replaces every secret-looking substring of s with [REDACTED].
// Assignments keep their key so the log still says what was there.
func Redact(s string) string {
	if s == "" {
		return s
	}
	lower := strings.ToLower(s)
	for _, p := range secretPatterns {
		if !containsAny(lower, p.triggers) {
			continue
		}
		if p.keepKey {
			s = p.re.ReplaceAllString(s, "${1}${2}"+redacted)
		} else {
			s = p.re.ReplaceAllString(s, redacted)
		}
		lower = strings.ToLower(s)
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
