package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Minimum prefix lengths for allowed_ip_addresses: a shorter rule would
// cover a large part of the address space (and with it private and
// metadata ranges), which is open egress in disguise.
const (
	minIPv4Bits = 8
	minIPv6Bits = 32
)

// ParseIPRule parses one allowed_ip_addresses entry: an address (read as a
// single-host prefix) or a CIDR, in canonical form. It rejects spellings
// that different parsers read differently (octal, hex, decimal or short
// IPv4, leading zeros), zones, host bits set below the mask, IPv4-mapped
// IPv6 (write the IPv4 address) and over-broad prefixes.
func ParseIPRule(s string) (netip.Prefix, error) {
	raw := strings.TrimSpace(s)
	if strings.HasPrefix(raw, "[") && strings.HasSuffix(raw, "]") {
		raw = raw[1 : len(raw)-1] // the seed accepted bracketed IPv6
	}
	if raw == "" {
		return netip.Prefix{}, errors.New("IP rule is empty")
	}
	addrPart, bitsPart, hasBits := strings.Cut(raw, "/")
	a, err := parseCanonicalAddr(addrPart)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("IP rule %q: %w", s, err)
	}
	if a.Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IP rule %q is an IPv4-mapped IPv6 address; write %s", s, a.Unmap())
	}
	p := netip.PrefixFrom(a, a.BitLen())
	if hasBits {
		p, err = netip.ParsePrefix(addrPart + "/" + bitsPart)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("IP rule %q: bad prefix length %q", s, bitsPart)
		}
	}
	return checkPrefix(s, p)
}

func checkPrefix(s string, p netip.Prefix) (netip.Prefix, error) {
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("IP rule %q has host bits set; write %s", s, p.Masked())
	}
	min := minIPv6Bits
	if p.Addr().Is4() {
		min = minIPv4Bits
	}
	if p.Bits() < min {
		return netip.Prefix{}, fmt.Errorf("IP rule %q is over-broad: prefixes shorter than /%d are refused", s, min)
	}
	return p, nil
}

// parseCanonicalAddr parses an IP address and refuses zones. netip already
// refuses every IPv4 spelling other than four dotted decimal octets
// without leading zeros.
func parseCanonicalAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("not a canonical IP address (IPv4 must be four dotted decimal octets without leading zeros): %w", err)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q has a zone; zones are not allowed", s)
	}
	return a, nil
}
