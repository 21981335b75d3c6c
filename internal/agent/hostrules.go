package agent

import "net/url"

// The agent's rules the host's preflight (internal/verdict) applies too,
// so that a run the agent would refuse fails before anything is created,
// with the same words.

// CheckHTTPURL accepts only absolute http(s) URLs with a host: the rule
// for OPENAI_BASE_URL and the sidecar's URL.
func CheckHTTPURL(raw string) error { return checkHTTPURL(raw) }

// DisplayHost is u's host, with its port only when not the scheme's
// default.
func DisplayHost(u *url.URL) string { return displayHost(u) }

// SpecEntry is the allowlist entry, in words, that would let the gateway
// reach u: `"host" to allowed_domains` (with the port when not the
// scheme's default), or to allowed_ip_addresses for an address.
func SpecEntry(u *url.URL) string { return specEntry(u) }
