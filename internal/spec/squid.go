package spec

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// squidLogFormat is a JSON-shaped access-log line (Squid does not
// JSON-escape fields, so a URL with a quote would break it; the gateway's
// own decision log is the authoritative record). It carries the
// traceparent so lines join to tool calls like the decision log does.
const squidLogFormat = `logformat mcpsidecar {"time":"%{%Y-%m-%dT%H:%M:%S}tg.%03tuZ","client":"%>a",` +
	`"method":"%rm","url":"%ru","status":%>Hs,"squid_status":"%Ss","server_ip":"%<a",` +
	`"bytes_up":%>st,"bytes_down":%<st,"duration_ms":%tr,"traceparent":"%{traceparent}>h"}`

// SquidConf renders squid.conf carrying the same rules as cfg, for when
// Squid is the gateway engine: the seed's configuration (seed-reference
// §6.3) plus a dst ACL refusing every non-public destination unless
// allowed_ip_addresses covers it (the threat: an allowed name resolving
// to loopback, a private network or the metadata service), and an access
// log in the run's output directory instead of "access_log none".
func SquidConf(cfg netpolicy.Config) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("http_port %d", GatewayPort)
	for _, p := range cfg.ConnectPorts {
		line("acl SSL_ports port %d", p)
	}
	for _, p := range cfg.HTTPPorts {
		line("acl Safe_ports port %d", p)
	}
	line("acl CONNECT method CONNECT")
	if len(cfg.AllowedDomains) > 0 {
		line("acl allowed_sites dstdomain %s", strings.Join(cfg.AllowedDomains, " "))
	}
	b.WriteString(squidLiteralACLs)
	line("acl non_public_dst dst %s", nonPublic())
	line("http_access deny !Safe_ports")
	line("http_access deny CONNECT !SSL_ports")
	if len(cfg.AllowedIPs) > 0 {
		line("acl allowed_ip_addresses dst %s", strings.Join(cfg.AllowedIPs, " "))
		line("http_access allow allowed_ip_addresses")
	}
	b.WriteString(squidLiteralDenials)
	line("http_access deny non_public_dst")
	if len(cfg.AllowedDomains) > 0 {
		line("http_access allow allowed_sites")
	}
	line("http_access deny all")
	line("%s", squidLogFormat)
	line("access_log stdio:%s/access.log mcpsidecar", OutputDir)
	line("cache_log /tmp/squid-cache.log")
	return b.String()
}

const squidLiteralACLs = `acl ipv4_literal_url url_regex -i ^[a-z][a-z0-9+.-]*://[0-9]+(\.[0-9]+){3}([:/]|$)
acl ipv4_literal_connect url_regex -i ^[0-9]+(\.[0-9]+){3}:
acl ipv6_literal_url url_regex -i ^[a-z][a-z0-9+.-]*://\[[0-9a-f:.]+\]([:/]|$)
acl ipv6_literal_connect url_regex -i ^\[[0-9a-f:.]+\]:
`

const squidLiteralDenials = `http_access deny ipv4_literal_url
http_access deny ipv4_literal_connect
http_access deny ipv6_literal_url
http_access deny ipv6_literal_connect
`

// nonPublic lists the non-public ranges without any range inside another
// listed one: Squid warns about, and drops, such overlaps.
func nonPublic() string {
	all := netpolicy.NonPublicPrefixes()
	var parts []string
	for i, p := range all {
		if !coveredByWider(p, i, all) {
			parts = append(parts, p.String())
		}
	}
	return strings.Join(parts, " ")
}

func coveredByWider(p netip.Prefix, i int, all []netip.Prefix) bool {
	for j, o := range all {
		if j != i && o.Bits() <= p.Bits() && o.Contains(p.Addr()) && (o.Bits() < p.Bits() || j < i) {
			return true
		}
	}
	return false
}
