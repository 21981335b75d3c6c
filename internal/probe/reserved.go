package probe

import (
	"net/netip"
	"strings"
)

// reservedTLDs never resolve on the public internet (RFC 2606, RFC 6761), so
// a probe may name them without a query leaving the machine for a real name.
var reservedTLDs = []string{"invalid", "test", "example"}

// reservedName reports whether name is under a reserved TLD.
func reservedName(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, tld := range reservedTLDs {
		if name == tld || strings.HasSuffix(name, "."+tld) {
			return true
		}
	}
	return false
}

// domainAllowed reports whether host matches one of the allowlist's domain
// rules, with Squid dstdomain semantics: ".example.com" matches the name and
// every subdomain, "example.com" only itself, "*.example.com" reads as
// ".example.com". Used only to avoid contacting an allowlisted target.
func domainAllowed(rules []string, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, r := range rules {
		r = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(r)), ".")
		r = strings.TrimPrefix(r, "*")
		if strings.HasPrefix(r, ".") {
			if host == r[1:] || strings.HasSuffix(host, r) {
				return true
			}
		} else if host == r {
			return true
		}
	}
	return false
}

// ipAllowed reports whether addr is covered by one of the CIDRs or addresses.
func ipAllowed(rules []string, addr netip.Addr) bool {
	for _, r := range rules {
		if p, err := netip.ParsePrefix(r); err == nil && p.Contains(addr) {
			return true
		}
		if a, err := netip.ParseAddr(r); err == nil && a == addr {
			return true
		}
	}
	return false
}

// localAddr reports whether addr stays on this machine or its private
// container networks: loopback, RFC 1918, or IPv6 unique-local. Only such
// addresses are ever dialed by a probe.
func localAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsLoopback() || addr.IsPrivate()
}
