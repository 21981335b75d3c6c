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

// IPRule is one parsed allowed_ip_addresses entry. Port, when set, is the
// one port an IP-literal request may reach (plain HTTP and CONNECT); a
// rule without a port opens the policy's default ports. A port applies to
// one address, so a rule with a port is a single-address prefix.
type IPRule struct {
	Prefix netip.Prefix // canonical, masked
	Port   uint16       // 0: the default ports
	// Masked reports that the entry was written with host bits set below
	// its mask ("10.1.2.3/8", which Python's ip_network(strict=False)
	// accepts); Prefix is the network it names. The spec warns about it.
	Masked bool
}

// String is the canonical spelling: "203.0.113.0/24", "192.0.2.7:8000"
// or "[2001:db8::5]:8080".
func (r IPRule) String() string {
	if r.Port == 0 {
		return r.Prefix.String()
	}
	return netip.AddrPortFrom(r.Prefix.Addr(), r.Port).String()
}

// ParseIPRule parses one allowed_ip_addresses entry: an address (read as a
// single-host prefix) or a CIDR, in canonical form, or one address with a
// port ("192.0.2.7:8000", "[2001:db8::5]:8080"; an IPv6 address with a
// port needs its brackets, as "2001:db8::5:8080" is an address). It
// rejects spellings that different parsers read differently (octal, hex,
// decimal or short IPv4, leading zeros), zones, IPv4-mapped IPv6 (write
// the IPv4 address), a port on a network, and over-broad prefixes. Host
// bits set below the mask are cleared and reported in [IPRule.Masked].
func ParseIPRule(s string) (IPRule, error) {
	raw, port, err := cutIPPort(s)
	if err != nil {
		return IPRule{}, err
	}
	if raw == "" {
		return IPRule{}, errors.New("IP rule is empty")
	}
	addrPart, bitsPart, hasBits := strings.Cut(raw, "/")
	if hasBits && port != 0 {
		return IPRule{}, fmt.Errorf("IP rule %q: a port applies to one address, not to a network; write one ADDRESS:PORT entry per address", s)
	}
	a, err := parseCanonicalAddr(addrPart)
	if err != nil {
		return IPRule{}, fmt.Errorf("IP rule %q: %w", s, err)
	}
	if a.Is4In6() {
		return IPRule{}, fmt.Errorf("IP rule %q is an IPv4-mapped IPv6 address; write %s", s, a.Unmap())
	}
	p := netip.PrefixFrom(a, a.BitLen())
	if hasBits {
		p, err = netip.ParsePrefix(addrPart + "/" + bitsPart)
		if err != nil {
			return IPRule{}, fmt.Errorf("IP rule %q: bad prefix length %q", s, bitsPart)
		}
	}
	if err := checkPrefix(s, p.Masked()); err != nil {
		return IPRule{}, err
	}
	return IPRule{Prefix: p.Masked(), Port: port, Masked: p.Masked() != p}, nil
}

// cutIPPort splits the optional port off an IP rule: "[v6]", "[v6]:port",
// "v4:port"; anything else has no port.
func cutIPPort(s string) (string, uint16, error) {
	raw := strings.TrimSpace(s)
	if strings.HasPrefix(raw, "[") {
		inner, rest, ok := strings.Cut(raw[1:], "]")
		if !ok {
			return "", 0, fmt.Errorf("IP rule %q: '[' without ']'", s)
		}
		if rest == "" {
			return inner, 0, nil // the seed accepted bracketed IPv6
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, fmt.Errorf("IP rule %q: only \":PORT\" may follow ']'", s)
		}
		if strings.Count(inner, ":") == 0 {
			return "", 0, fmt.Errorf("IP rule %q: brackets are for IPv6; write an IPv4 address as ADDRESS:PORT", s)
		}
		return withPort(s, inner, p)
	}
	if strings.Count(raw, ":") == 1 {
		addr, p, _ := strings.Cut(raw, ":")
		return withPort(s, addr, p)
	}
	return raw, 0, nil
}

func withPort(s, addr, p string) (string, uint16, error) {
	port, err := ParsePort(p)
	if err != nil {
		return "", 0, fmt.Errorf("IP rule %q: %w", s, err)
	}
	return addr, port, nil
}

func checkPrefix(s string, p netip.Prefix) error {
	min := minIPv6Bits
	if p.Addr().Is4() {
		min = minIPv4Bits
	}
	if p.Bits() < min {
		return fmt.Errorf("IP rule %q is over-broad: prefixes shorter than /%d are refused", s, min)
	}
	return nil
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
