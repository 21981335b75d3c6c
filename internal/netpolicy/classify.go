package netpolicy

import "net/netip"

// Class is what kind of destination an address is. Only [Public]
// addresses are reachable without an explicit allowed_ip_addresses entry.
type Class int

// The classes, from the gateway's point of view.
const (
	Invalid       Class = iota // the zero netip.Addr
	Public                     // globally routable unicast
	Loopback                   // 127.0.0.0/8, ::1
	Private                    // RFC 1918, fc00::/7
	LinkLocal                  // 169.254.0.0/16 (cloud metadata), fe80::/10
	CGNAT                      // 100.64.0.0/10 shared address space
	Multicast                  // 224.0.0.0/4, ff00::/8
	Unspecified                // 0.0.0.0, ::
	EmbeddedIPv4               // IPv6 forms that carry an IPv4 address
	Documentation              // TEST-NETs, 2001:db8::/32, 3fff::/20
	Reserved                   // every other special-purpose range
)

var classNames = [...]string{
	Invalid:       "invalid",
	Public:        "public",
	Loopback:      "loopback",
	Private:       "private",
	LinkLocal:     "link-local",
	CGNAT:         "cgnat",
	Multicast:     "multicast",
	Unspecified:   "unspecified",
	EmbeddedIPv4:  "embedded-ipv4",
	Documentation: "documentation",
	Reserved:      "reserved",
}

// String is the lower-case name used in decision-log reasons.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "unknown"
	}
	return classNames[c]
}

// classRange ties a special-purpose range (IANA registries) to its class.
// Ranges are checked in order, so a more specific range comes first.
type classRange struct {
	prefix netip.Prefix
	class  Class
}

func rng(s string, c Class) classRange { return classRange{netip.MustParsePrefix(s), c} }

var ranges = []classRange{
	// IPv4
	rng("0.0.0.0/32", Unspecified),
	rng("0.0.0.0/8", Reserved), // "this network"
	rng("10.0.0.0/8", Private),
	rng("100.64.0.0/10", CGNAT),
	rng("127.0.0.0/8", Loopback),
	rng("169.254.0.0/16", LinkLocal),
	rng("172.16.0.0/12", Private),
	rng("192.0.0.0/24", Reserved), // IETF protocol assignments
	rng("192.0.2.0/24", Documentation),
	rng("192.88.99.0/24", Reserved), // 6to4 relay anycast
	rng("192.168.0.0/16", Private),
	rng("198.18.0.0/15", Reserved), // benchmarking
	rng("198.51.100.0/24", Documentation),
	rng("203.0.113.0/24", Documentation),
	rng("224.0.0.0/4", Multicast),
	rng("240.0.0.0/4", Reserved), // includes 255.255.255.255
	// IPv6
	rng("::/128", Unspecified),
	rng("::1/128", Loopback),
	rng("::ffff:0:0/96", EmbeddedIPv4),  // IPv4-mapped
	rng("::/96", EmbeddedIPv4),          // IPv4-compatible (deprecated)
	rng("64:ff9b::/96", EmbeddedIPv4),   // NAT64 well-known prefix
	rng("64:ff9b:1::/48", EmbeddedIPv4), // NAT64 local-use
	rng("::/8", Reserved),
	rng("100::/64", Reserved),      // discard-only
	rng("2001::/32", EmbeddedIPv4), // Teredo
	rng("2001:db8::/32", Documentation),
	rng("2001::/23", Reserved),     // IETF protocol assignments
	rng("2002::/16", EmbeddedIPv4), // 6to4
	rng("3fff::/20", Documentation),
	rng("5f00::/16", Reserved), // SRv6 SIDs
	rng("fc00::/7", Private),   // unique local
	rng("fe80::/10", LinkLocal),
	rng("fec0::/10", Reserved), // site-local (deprecated)
	rng("ff00::/8", Multicast),
}

// Classify says what kind of destination a is. The zone is ignored.
// IPv4-mapped addresses are EmbeddedIPv4 whatever they map to: the
// gateway dials the IPv4 form directly or not at all.
func Classify(a netip.Addr) Class {
	if !a.IsValid() {
		return Invalid
	}
	a = a.WithZone("")
	for _, cr := range ranges {
		if cr.prefix.Contains(a) {
			return cr.class
		}
	}
	if a.Is6() && !netip.MustParsePrefix("2000::/3").Contains(a) {
		return Reserved // not global unicast space
	}
	return Public
}

// NonPublicPrefixes lists every range [Classify] does not call [Public]:
// the special-purpose table, then the IPv6 space outside 2000::/3. The
// Squid engine denies these with a dst ACL.
func NonPublicPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ranges)+3)
	for _, cr := range ranges {
		out = append(out, cr.prefix)
	}
	for _, s := range []string{"::/3", "4000::/2", "8000::/1"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// PrivatePrefixes lists the ranges [Classify] calls [Private] (RFC 1918,
// unique local IPv6): where the Docker host's bridge address lies.
func PrivatePrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, cr := range ranges {
		if cr.class == Private {
			out = append(out, cr.prefix)
		}
	}
	return out
}
