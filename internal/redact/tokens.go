package redact

import (
	"regexp"
	"strings"
)

// A Token is one known shape of an API key or token. [String] removes
// every match; the probe's credential scan reports the shapes it finds
// by [Token.Name].
type Token struct {
	// Name says what was found, in a sentence: "holds an sk- key".
	Name string
	// Prefixes are literal parts of every match, case as written: a
	// cheap test before the regexp runs.
	Prefixes []string
	re       *regexp.Regexp
}

// Tokens are the known key and token shapes, in the order [String]
// removes them (sk-ant- before sk-, so both names are reported for an
// Anthropic key, as before).
var Tokens = []Token{
	{Name: "an sk-ant- key", Prefixes: []string{"sk-ant-"}, re: regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]+`)},
	{Name: "an sk- key", Prefixes: []string{"sk-"}, re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]+`)},
	{Name: "a ghp_ token", Prefixes: []string{"ghp_"}, re: regexp.MustCompile(`\bghp_[A-Za-z0-9_]+`)},
	// GitHub's other token kinds: OAuth, user-to-server, server-to-server,
	// refresh (the sidecar's rule; the probe missed them).
	{Name: "a GitHub token", Prefixes: []string{"gho_", "ghu_", "ghs_", "ghr_"}, re: regexp.MustCompile(`\bgh[ousr]_[A-Za-z0-9_]{20,}`)},
	{Name: "a github_pat_ token", Prefixes: []string{"github_pat_"}, re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]+`)},
	{Name: "an AKIA access key id", Prefixes: []string{"AKIA"}, re: regexp.MustCompile(`\bAKIA[A-Z0-9]+`)},
	// Temporary AWS access key ids, exactly 20 characters: "ASIAN" is a
	// word (the sidecar's rule; the probe missed them).
	{Name: "an ASIA access key id", Prefixes: []string{"ASIA"}, re: regexp.MustCompile(`\bASIA[A-Z0-9]{16}\b`)},
	{Name: "an AIza key", Prefixes: []string{"AIza"}, re: regexp.MustCompile(`\bAIza[A-Za-z0-9_-]+`)},
	// Hugging Face tokens (the probe's rule; the sidecar missed them).
	{Name: "an hf_ token", Prefixes: []string{"hf_"}, re: regexp.MustCompile(`\bhf_[A-Za-z0-9_-]+`)},
	// Slack tokens and JSON Web Tokens (the sidecar's rules; the probe
	// missed them).
	{Name: "a Slack token", Prefixes: []string{"xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-"}, re: regexp.MustCompile(`\bxox[baprs]-[A-Za-z0-9\-]{10,}`)},
	{Name: "a JSON Web Token", Prefixes: []string{"eyJ"}, re: regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`)},
}

// In reports whether s holds one of t's prefixes, so that t may match.
func (t Token) In(s string) bool {
	for _, p := range t.Prefixes {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// FindAll returns every match of t in s.
func (t Token) FindAll(s string) []string {
	if !t.In(s) {
		return nil
	}
	return t.re.FindAllString(s, -1)
}

// tokenPatterns are [Tokens] as [String] runs them: triggered by a
// prefix in any case (the text is searched lower-cased).
var tokenPatterns = func() []pattern {
	out := make([]pattern, len(Tokens))
	for i, t := range Tokens {
		out[i] = pattern{re: t.re}
		for _, p := range t.Prefixes {
			out[i].triggers = append(out[i].triggers, strings.ToLower(p))
		}
	}
	return out
}()
