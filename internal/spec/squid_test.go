package spec

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// squidCases are gateway policies whose squid.conf the tests below read
// the way Squid 5.7 does.
var squidCases = []struct {
	name           string
	domains, ips   []string
	http, connect  []uint16
	wantHTTPAccess []string
}{
	{
		name: "domains only", domains: []string{".allowed.test", "api.other.test"},
		wantHTTPAccess: []string{"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports",
			"deny !allowed_sites", "deny non_public_dst", "allow allowed_sites", "deny all"},
	},
	{
		name: "domains and ips", domains: []string{".allowed.test"},
		ips: []string{"172.18.0.0/16", "10.1.2.3", "fd00:1::/64", "2001:db8::1", "198.51.100.0/24", "10.1.0.0/16"},
		wantHTTPAccess: []string{"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports", "allow allowed_ip_literals",
			"deny !allowed_sites", "deny non_public_dst", "allow allowed_sites", "deny all"},
	},
	{
		// ::/32 spans the IPv4-mapped space Squid keeps IPv4 in.
		name: "wide ipv6 rule", domains: []string{".allowed.test"}, ips: []string{"::/32", "8.8.8.0/24"},
		wantHTTPAccess: []string{"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports", "allow allowed_ip_literals",
			"deny !allowed_sites", "deny non_public_dst", "allow allowed_sites", "deny all"},
	},
	{
		name: "ips only", ips: []string{"192.168.7.0/24"},
		wantHTTPAccess: []string{"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports",
			"allow allowed_ip_literals", "deny all"},
	},
	{
		name:           "nothing allowed",
		wantHTTPAccess: []string{"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports", "deny all"},
	},
	{
		name: "connect port not an http port", domains: []string{".allowed.test"}, http: []uint16{80}, connect: []uint16{443, 8443},
		wantHTTPAccess: []string{"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports",
			"deny !allowed_sites", "deny non_public_dst", "allow allowed_sites", "deny all"},
	},
	{
		name:    "entries with ports",
		domains: []string{".allowed.test", "models.lan.test:11434", "api.allowed.test:8080", "host.docker.internal:11434"},
		ips:     []string{"192.168.1.20:8000", "[fd00::5]:8080", "10.1.0.0/16"},
		wantHTTPAccess: []string{"allow entry1_ip entry1_port", "allow entry2_ip entry2_port",
			"allow entry3_site entry3_port !non_public_dst", "allow entry4_site entry4_port !non_public_dst",
			"allow entry5_site entry5_port !host_gateway_refused",
			"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports", "allow allowed_ip_literals",
			"deny !allowed_sites", "deny non_public_dst", "allow allowed_sites", "deny all"},
	},
	{
		name: "only entries with ports", domains: []string{"models.lan.test:11434"}, ips: []string{"192.0.2.7:8000"},
		wantHTTPAccess: []string{"allow entry1_ip entry1_port", "allow entry2_site entry2_port !non_public_dst",
			"deny CONNECT !SSL_ports", "deny !CONNECT !Safe_ports", "deny all"},
	},
	{
		name: "no ports", domains: []string{".allowed.test"}, http: []uint16{}, connect: []uint16{},
		wantHTTPAccess: []string{"deny CONNECT", "deny !CONNECT",
			"deny !allowed_sites", "deny non_public_dst", "allow allowed_sites", "deny all"},
	},
}

func squidCaseConfig(t *testing.T, i int) netpolicy.Config {
	t.Helper()
	c := squidCases[i]
	cfg, err := GatewayConfig(c.domains, c.ips)
	if err != nil {
		t.Fatal(err)
	}
	if c.http != nil {
		cfg.HTTPPorts, cfg.ConnectPorts = c.http, c.connect
	}
	return cfg
}

// squidDirectives returns the values of every line starting with prefix.
func squidDirectives(conf, prefix string) []string {
	var out []string
	for _, l := range strings.Split(conf, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, v)
		}
	}
	return out
}

// squidACL returns the flags and values of acl name of the given type,
// over every line that declares it (Squid appends repeated lines).
func squidACL(t *testing.T, conf, name, typ string) (flags, values []string) {
	t.Helper()
	for _, v := range squidDirectives(conf, "acl "+name+" ") {
		fields := strings.Fields(v)
		if fields[0] != typ {
			t.Fatalf("acl %s is of type %s, want %s", name, fields[0], typ)
		}
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "-") {
				flags = append(flags, f)
			} else {
				values = append(values, f)
			}
		}
	}
	return flags, values
}

func squidPrefixes(t *testing.T, values []string) []netip.Prefix {
	t.Helper()
	out := make([]netip.Prefix, 0, len(values))
	for _, v := range values {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			t.Fatalf("dst entry %q: %v", v, err)
		}
		out = append(out, p)
	}
	return out
}

func TestSquidRuleOrder(t *testing.T) {
	for i, c := range squidCases {
		t.Run(c.name, func(t *testing.T) {
			conf := SquidConf(squidCaseConfig(t, i))
			got := squidDirectives(conf, "http_access ")
			if diff := cmp.Diff(c.wantHTTPAccess, got); diff != "" {
				t.Errorf("http_access rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSquidNoLookupBeforeAllowlist: the only ACL that makes Squid resolve
// a name (a dst ACL without -n) is used only after names outside the
// allowlist were refused; the ACLs before it carry -n (no lookup of a
// name, no reverse lookup of a literal).
func TestSquidNoLookupBeforeAllowlist(t *testing.T) {
	for i, c := range squidCases {
		t.Run(c.name, func(t *testing.T) {
			conf := SquidConf(squidCaseConfig(t, i))
			for _, acl := range []struct{ name, typ string }{{"allowed_sites", "dstdomain"}, {"allowed_ip_literals", "dst"}} {
				if flags, values := squidACL(t, conf, acl.name, acl.typ); len(values) > 0 && !slices.Equal(flags, []string{"-n"}) {
					t.Errorf("acl %s flags %q, want -n", acl.name, flags)
				}
			}
			rules := squidDirectives(conf, "http_access ")
			gate := slices.Index(rules, "deny !allowed_sites")
			for i, r := range rules {
				if !strings.Contains(r, "non_public_dst") && !strings.Contains(r, "host_gateway_refused") {
					continue
				}
				if gate >= 0 && gate < i || entryGated(t, conf, r) {
					continue
				}
				t.Errorf("rule %q needs a lookup before the allowlist refused other names: %q", r, rules)
			}
		})
	}
}

// entryGated reports whether rule r is an entry's rule whose first ACL is
// the entry's "dstdomain -n" site: Squid stops at the first ACL that does
// not match, so the lookup after it is of the entry's own name.
func entryGated(t *testing.T, conf, r string) bool {
	t.Helper()
	fields := strings.Fields(r)
	if len(fields) < 2 || fields[0] != "allow" || !strings.HasSuffix(fields[1], "_site") {
		return false
	}
	flags, values := squidACL(t, conf, fields[1], "dstdomain")
	return slices.Equal(flags, []string{"-n"}) && len(values) == 1
}

// TestSquidPorts: CONNECT is held to connect_ports and everything else to
// http_ports, each port declared once.
func TestSquidPorts(t *testing.T) {
	for i, c := range squidCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := squidCaseConfig(t, i)
			conf := SquidConf(cfg)
			for _, acl := range []struct {
				name  string
				ports []uint16
			}{{"SSL_ports", cfg.ConnectPorts}, {"Safe_ports", cfg.HTTPPorts}} {
				_, values := squidACL(t, conf, acl.name, "port")
				var want []string
				for _, p := range acl.ports {
					want = append(want, strconv.Itoa(int(p)))
				}
				if diff := cmp.Diff(want, values); diff != "" {
					t.Errorf("acl %s (-want +got):\n%s", acl.name, diff)
				}
			}
		})
	}
}

// TestSquidDstACLsLoadWhole: Squid 5.7 drops a dst entry that overlaps
// another entry of the same ACL ("is ignored to keep splay tree searching
// predictable"), and keeps IPv4 as IPv4-mapped IPv6, so an IPv6 entry
// overlapping ::ffff:0:0/96 overlaps IPv4 entries.
func TestSquidDstACLsLoadWhole(t *testing.T) {
	for i, c := range squidCases {
		t.Run(c.name, func(t *testing.T) {
			conf := SquidConf(squidCaseConfig(t, i))
			for _, acl := range []string{"non_public_dst", "allowed_ip_literals"} {
				_, values := squidACL(t, conf, acl, "dst")
				ps := squidPrefixes(t, values)
				for j, p := range ps {
					if p.Addr().Is6() && p.Overlaps(squidIPv4Space) {
						t.Errorf("acl %s: %s overlaps the IPv4-mapped space", acl, p)
					}
					for _, o := range ps[j+1:] {
						if p.Overlaps(o) {
							t.Errorf("acl %s: %s overlaps %s", acl, p, o)
						}
					}
				}
			}
		})
	}
}

// TestSquidAddressDecisions reads the dst ACLs as Squid matches them and
// holds every answer to what our gateway decides ([netpolicy.Policy]):
// an answer passes non_public_dst exactly when CheckAddr allows it (a
// dst ACL matches a name when any answer matches, so one refused answer
// refuses the name, as in our gateway), and a literal passes
// allowed_ip_literals exactly when AllowsAddr covers it. Squid sees an
// IPv4-mapped address as the IPv4 address, as our gateway judges an
// answer (a mapped literal is judged as its IPv4 form here: Squid cannot
// tell them apart, so an IPv6 rule spanning ::ffff:0:0/96 covers no IPv4).
func TestSquidAddressDecisions(t *testing.T) {
	for i, c := range squidCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := squidCaseConfig(t, i)
			pol, err := netpolicy.Compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			conf := SquidConf(cfg)
			_, np := squidACL(t, conf, "non_public_dst", "dst")
			_, lit := squidACL(t, conf, "allowed_ip_literals", "dst")
			nonPublic, literals := squidPrefixes(t, np), squidPrefixes(t, lit)
			for _, a := range probeAddrs(t, cfg) {
				squidView := a.Unmap()
				if len(cfg.AllowedDomains) > 0 {
					_, _, ok := pol.CheckAddr(squidView)
					if denied := containsAddr(nonPublic, squidView); denied == ok {
						t.Errorf("answer %s: squid denies %v, our gateway allows %v", a, denied, ok)
					}
				}
				covered := coveredWithoutPort(t, cfg, squidView)
				if got := containsAddr(literals, squidView); got != covered {
					t.Errorf("literal %s: squid allows %v, our gateway %v", a, got, covered)
				}
			}
		})
	}
}

// coveredWithoutPort: allowed_ip_literals holds the rules without a port;
// each rule with one has an ACL of its own.
func coveredWithoutPort(t *testing.T, cfg netpolicy.Config, a netip.Addr) bool {
	t.Helper()
	for _, s := range cfg.AllowedIPs {
		r, err := netpolicy.ParseIPRule(s)
		if err != nil {
			t.Fatal(err)
		}
		if r.Port == 0 && r.Prefix.Contains(a) && !(r.Prefix.Addr().Is6() && r.Prefix.Overlaps(squidIPv4Space) && a.Is4()) {
			return true
		}
	}
	return false
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) })
}

// probeAddrs are the edges of every non-public range and every allowed
// prefix (first, last and their neighbours), their IPv4-mapped forms, and
// random addresses from a fixed seed.
func probeAddrs(t *testing.T, cfg netpolicy.Config) []netip.Addr {
	t.Helper()
	edges := netpolicy.NonPublicPrefixes()
	edges = append(edges, parsePrefixes(cfg.AllowedIPs)...)
	edges = append(edges, netip.MustParsePrefix("2000::/3"), squidIPv4Space)
	var out []netip.Addr
	for _, p := range edges {
		first, last := p.Masked().Addr(), lastAddr(p)
		out = append(out, first, last, first.Prev(), last.Next())
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 4000 {
		var b16 [16]byte
		for i := range b16 {
			b16[i] = byte(r.Uint32())
		}
		var b4 [4]byte
		copy(b4[:], b16[:4])
		out = append(out, netip.AddrFrom16(b16), netip.AddrFrom4(b4))
	}
	var all []netip.Addr
	for _, a := range out {
		if !a.IsValid() {
			continue
		}
		all = append(all, a)
		if a.Is4() {
			all = append(all, netip.AddrFrom16(a.As16()))
		}
	}
	if len(all) < 8000 {
		t.Fatalf("only %d probe addresses", len(all))
	}
	return all
}

func TestPrefixSet(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	tests := []struct {
		name             string
		include, exclude []netip.Prefix
		want             []netip.Prefix
	}{
		{"empty", nil, nil, nil},
		{"nested merged", pfx("10.0.0.0/8", "10.1.0.0/16"), nil, pfx("10.0.0.0/8")},
		{"adjacent merged", pfx("10.0.0.0/9", "10.128.0.0/9"), nil, pfx("10.0.0.0/8")},
		{"families kept apart", pfx("255.255.255.255/32", "::/128"), nil, pfx("255.255.255.255/32", "::/128")},
		{"hole", pfx("10.0.0.0/8"), pfx("10.128.0.0/9", "10.0.0.0/10"), pfx("10.64.0.0/10")},
		{"host removed", pfx("192.0.2.0/30"), pfx("192.0.2.1/32"), pfx("192.0.2.0/32", "192.0.2.2/31")},
		{"whole family", pfx("0.0.0.0/0"), pfx("0.0.0.0/1"), pfx("128.0.0.0/1")},
		{"top of ipv4", pfx("255.255.255.0/24"), pfx("255.255.255.255/32"),
			pfx("255.255.255.0/25", "255.255.255.128/26", "255.255.255.192/27", "255.255.255.224/28",
				"255.255.255.240/29", "255.255.255.248/30", "255.255.255.252/31", "255.255.255.254/32")},
		{"top of ipv6 nested", pfx("ff00::/8", "ffff::/16", "fe80::/10"), nil, pfx("fe80::/10", "ff00::/8")},
		{"squid ipv4 space cut", pfx("::/80"), pfx("::ffff:0:0/96"), pfx("::/81", "::8000:0:0/82", "::c000:0:0/83",
			"::e000:0:0/84", "::f000:0:0/85", "::f800:0:0/86", "::fc00:0:0/87", "::fe00:0:0/88", "::ff00:0:0/89",
			"::ff80:0:0/90", "::ffc0:0:0/91", "::ffe0:0:0/92", "::fff0:0:0/93", "::fff8:0:0/94", "::fffc:0:0/95", "::fffe:0:0/96")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := prefixSet(tt.include, tt.exclude)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("prefixSet (-want +got):\n%s", diff)
			}
		})
	}
}
