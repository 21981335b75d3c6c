// Package netpolicy is the one grammar for egress rules: it parses domain
// rules (Squid dstdomain semantics) and IP/CIDR rules, normalises host names,
// classifies addresses, and decides whether a name or an address is allowed.
// The spec validator and the egress gateway both use it, so the two can never
// disagree. It performs no I/O: no DNS, no dialing.
package netpolicy

// Config is the gateway section of a resolved profile, as written by
// `mcpsidecar spec resolve` (gateway-policy.json) and read by
// `mcpsidecar gateway --policy FILE`.
type Config struct {
	Schema string `json:"schema"` // "mcpsidecar.gateway-policy/v1"
	// AllowedDomains are normalised domain rules: ".example.com" (the name
	// and every subdomain) or "example.com" (that name only).
	AllowedDomains []string `json:"allowed_domains"`
	// AllowedIPs are canonical CIDRs ("203.0.113.7/32", "2001:db8::/32").
	AllowedIPs []string `json:"allowed_ip_addresses"`
	// HTTPPorts are the ports plain HTTP may reach; ConnectPorts those a
	// CONNECT tunnel may reach. The seed's Squid allowed 80, 443 and 443.
	HTTPPorts    []uint16 `json:"http_ports"`
	ConnectPorts []uint16 `json:"connect_ports"`
}

// ConfigSchema is the value of [Config.Schema].
const ConfigSchema = "mcpsidecar.gateway-policy/v1"
