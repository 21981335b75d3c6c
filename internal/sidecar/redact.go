package sidecar

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxPreviewChars bounds the result preview in an audit record.
const MaxPreviewChars = 500

const redacted = "[REDACTED]"

// secretPatterns match credentials that must never reach the audit log: a
// tool result or argument may carry a key the agent or an upstream leaked,
// and the audit log is copied into the run directory the user shares.
var secretPatterns = []*regexp.Regexp{
	// PEM blocks (private keys, certificates with keys), also with escaped newlines.
	regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)`),
	// OpenAI-style and Anthropic-style API keys.
	regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`),
	// GitHub tokens: classic prefixes and fine-grained PATs.
	regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`),
	// AWS access key ids.
	regexp.MustCompile(`\b(AKIA|ASIA)[A-Z0-9]{16}\b`),
	// AWS secret keys written as assignments.
	regexp.MustCompile(`(?i)(aws_secret_access_key|secret_access_key)(["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}`),
	// Bearer tokens in Authorization-style text.
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*`),
	// Slack tokens and Google API keys.
	regexp.MustCompile(`\bxox[baprs]-[A-Za-z0-9\-]{10,}`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z\-_]{35}\b`),
	// JSON Web Tokens.
	regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`),
	// Generic key=value secrets.
	regexp.MustCompile(`(?i)\b(api[_-]?key|access[_-]?token|secret|password|passwd)(["']?\s*[:=]\s*["']?)[^\s"',;]{6,}`),
}

// Redact replaces every secret-looking substring of s with [REDACTED].
// Assignments keep their key so the log still says what was there.
func Redact(s string) string {
	if s == "" {
		return s
	}
	for _, re := range secretPatterns {
		if re.NumSubexp() == 2 && strings.Contains(re.String(), `[:=]`) {
			s = re.ReplaceAllString(s, "${1}${2}"+redacted)
			continue
		}
		s = re.ReplaceAllString(s, redacted)
	}
	return s
}

// Preview redacts s and cuts it to at most max characters (runes), ending
// with "…" when cut. Redaction runs first so a secret cut in half cannot
// escape the patterns.
func Preview(s string, max int) string {
	s = Redact(s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	runes := []rune(s)
	if max < 1 {
		return ""
	}
	return string(runes[:max-1]) + "…"
}
