// Package egress is the sandbox's egress gateway: an HTTP forward proxy
// (absolute-URI requests) and CONNECT tunnel proxy that denies by default.
//
// For every request it, in this order: parses and normalises the target;
// checks the port; matches the name against the allowlist before any DNS
// lookup (a denied name never leaves as a query); resolves the name with an
// injectable [Resolver]; refuses the request when any resolved address is
// not public and not covered by allowed_ip_addresses; and dials exactly an
// address it checked (the dialer's ControlContext checks it once more at
// socket level, and no second lookup happens). Every request but the
// readiness probe produces one [Decision] line in the decision log. A
// request the log cannot record is not served: once the log reaches its
// byte budget or a write fails, it ends with a [Decision.LogFull] line and
// the gateway refuses all traffic (full.go).
//
// The rules themselves (grammar, normalisation, address classes) belong to
// internal/netpolicy; this package must not grow its own. It does not read
// flags or the environment (internal/cli does), never terminates TLS and
// never skips TLS verification, and never forwards Proxy-* headers.
//
// With an [Injection] it also serves the credential listener
// ([Gateway.ServeCredentials]): origin-form requests naming a credential's
// host, accepted only with the run's placeholder, sent on with the real
// credential through the same checks; the workload never holds the key.
//
// With a [Relay] it also serves the relay of the agent's own telemetry
// ([Gateway.ServeRelay], relay.go): OTLP/HTTP on three paths, bounded,
// one decision line per request, each payload taken appended to a spool
// ([RelayLine]) that the host sends on; the gateway dials nothing for it.
//
// It also reads Squid's access log, written in [SquidLogFormat], into the
// same [Decision] records, so a run with the Squid engine yields the same
// egress-decisions.jsonl.
package egress
