package probe

import "regexp"

// redacted replaces a secret value in evidence.
const redacted = "[REDACTED]"

// The seed's always-on redaction, ported to RE2. It
// runs on every summary and evidence string when a result is built, so a
// secret the probe happened to read is never kept, even in memory, and
// never reaches report.json (threat: a probe report shared for comparison
// leaks the key it found).
var (
	pemBlock = regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)
	// A line whose key names a secret: keep the key and separator, drop
	// the value. Prefix characters as the seed: [A-Z0-9_(). -].
	secretLine = regexp.MustCompile(`(?im)^([A-Z0-9_(). -]*(?:API KEY|APIKEY|API_KEY|API-KEY|KEY|TOKEN|SECRET|PASSWORD|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)[A-Z0-9_(). -]*?[ \t]*[=:][ \t]*)[^\r\n]+`)
	tokens     = []*regexp.Regexp{
		regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]+`),
		regexp.MustCompile(`\bsk-[A-Za-z0-9_-]+`),
		regexp.MustCompile(`\bghp_[A-Za-z0-9_]+`),
		regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]+`),
		regexp.MustCompile(`\bAKIA[A-Z0-9]+`),
		regexp.MustCompile(`\bAIza[A-Za-z0-9_-]+`),
		regexp.MustCompile(`\bhf_[A-Za-z0-9_-]+`),
	}
)

// Redact removes secrets from s: PEM private-key blocks, values of
// secret-named key/value lines, and known API-token shapes, in that order.
func Redact(s string) string {
	if s == "" {
		return s
	}
	s = pemBlock.ReplaceAllString(s, redacted)
	s = secretLine.ReplaceAllString(s, "${1}"+redacted)
	for _, re := range tokens {
		s = re.ReplaceAllString(s, redacted)
	}
	return s
}
