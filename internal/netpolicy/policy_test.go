package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"schema", Config{Schema: "other/v9"}, `schema "other/v9"`},
		{"domain", Config{AllowedDomains: []string{"ok.test", ".com"}}, "allowed_domains[1]"},
		{"ip", Config{AllowedIPs: []string{"0177.0.0.1"}}, "allowed_ip_addresses[0]"},
		{"http port 0", Config{HTTPPorts: []uint16{0}}, "http_ports: port 0"},
		{"connect port 0", Config{ConnectPorts: []uint16{443, 0}}, "connect_ports: port 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestPorts(t *testing.T) {
	p, err := Compile(NewConfig(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		port          uint16
		http, connect bool
	}{{80, true, false}, {443, true, true}, {8080, false, false}, {22, false, false}}
	for _, tt := range tests {
		if got := p.AllowsHTTPPort(tt.port); got != tt.http {
			t.Errorf("AllowsHTTPPort(%d) = %v, want %v", tt.port, got, tt.http)
		}
		if got := p.AllowsConnectPort(tt.port); got != tt.connect {
			t.Errorf("AllowsConnectPort(%d) = %v, want %v", tt.port, got, tt.connect)
		}
	}
}

func TestEmptyPolicyDeniesEverything(t *testing.T) {
	p, err := Compile(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := p.MatchName("example.test"); ok {
		t.Errorf("MatchName allowed by %q", r)
	}
	if p.AllowsHTTPPort(80) || p.AllowsConnectPort(443) {
		t.Error("empty port lists allowed a port")
	}
}

func TestMatchNameMostSpecific(t *testing.T) {
	p, err := Compile(NewConfig([]string{".test.example", ".a.test.example", "b.a.test.example"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"b.a.test.example":   "b.a.test.example",
		"c.b.a.test.example": ".a.test.example",
		"a.test.example":     ".a.test.example",
		"z.test.example":     ".test.example",
	}
	for host, want := range tests {
		t.Run(host, func(t *testing.T) {
			got, ok := p.MatchName(host)
			if !ok || got != want {
				t.Fatalf("got %q, %v; want %q", got, ok, want)
			}
		})
	}
}

func TestCheckAddrEdges(t *testing.T) {
	p, err := Compile(NewConfig(nil, []string{"fe80::/64"}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr   netip.Addr
		ok     bool
		reason string
	}{
		{netip.Addr{}, false, "invalid address"},
		{netip.MustParseAddr("fe80::1%eth0"), false, "has a zone"},
		{netip.MustParseAddr("fe80::1"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr.String(), func(t *testing.T) {
			_, reason, ok := p.CheckAddr(tt.addr)
			if ok != tt.ok || !strings.Contains(reason, tt.reason) {
				t.Fatalf("got %q, %v; want %q, %v", reason, ok, tt.reason, tt.ok)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	if got := Class(99).String(); got != "unknown" {
		t.Errorf("Class(99) = %q", got)
	}
	if got := Classify(netip.Addr{}); got != Invalid {
		t.Errorf("Classify(zero) = %v", got)
	}
}

func TestDomainRuleMatches(t *testing.T) {
	r, err := ParseDomainRule("*.Example.TEST")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DomainRule{Name: "example.test", Subdomains: true}, r); diff != "" {
		t.Fatalf("mismatch (-want +got):\n%s", diff)
	}
	for host, want := range map[string]bool{"example.test": true, "a.example.test": true, "badexample.test": false} {
		if got := r.Matches(host); got != want {
			t.Errorf("Matches(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestLoadCorpusCoversEachKind(t *testing.T) {
	c, err := LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range c.Addresses {
		seen[a.Class] = true
	}
	for cl := Public; cl <= Reserved; cl++ {
		if !seen[cl.String()] {
			t.Errorf("corpus has no %s address", cl)
		}
	}
}

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"example.test", "0x7f.1", "[::1]", "bücher.test", "a..b"} {
		f.Add(s)
	}
	p, err := Compile(NewConfig([]string{".example.test"}, nil))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := NormalizeHost(s)
		if err != nil {
			return
		}
		again, err := NormalizeHost(n)
		if err != nil || again != n {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, n, again, err)
		}
		if _, ok := p.MatchName(s); ok && !strings.HasSuffix(n, "example.test") {
			t.Fatalf("%q (%q) matched .example.test", s, n)
		}
	})
}

func TestNonPublicPrefixesAgreeWithClassify(t *testing.T) {
	for _, pf := range NonPublicPrefixes() {
		for _, a := range []netip.Addr{pf.Addr(), lastAddr(pf)} {
			if c := Classify(a); c == Public {
				t.Errorf("%s (in %s) classified public", a, pf)
			}
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// portPolicy has rules with and without ports, and a host-gateway entry.
func portPolicy(t *testing.T) *Policy {
	t.Helper()
	p, err := Compile(NewConfig(
		[]string{".allowed.test", "api.allowed.test:8080", "models.lan:11434", ".lan.test:8000", HostGateway + ":11434"},
		[]string{"192.168.1.20:8000", "[fd00::5]:8080", "203.0.113.0/24"}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAllowsPorts(t *testing.T) {
	p := portPolicy(t)
	tests := []struct {
		host    string
		port    uint16
		connect bool
		rule    string
	}{
		{"api.allowed.test", 443, true, ".allowed.test"},
		{"api.allowed.test", 80, false, ".allowed.test"},
		{"api.allowed.test", 80, true, ""},
		{"api.allowed.test", 8080, false, "api.allowed.test:8080"},
		{"api.allowed.test", 8080, true, "api.allowed.test:8080"},
		{"other.allowed.test", 8080, false, ""},
		{"models.lan", 11434, false, "models.lan:11434"},
		{"models.lan", 11434, true, "models.lan:11434"},
		{"models.lan", 443, true, ""},
		{"models.lan", 80, false, ""},
		{"MODELS.lan.", 11434, false, "models.lan:11434"},
		{"gpu.lan.test", 8000, true, ".lan.test:8000"},
		{"lan.test", 8000, false, ".lan.test:8000"},
		{HostGateway, 11434, false, HostGateway + ":11434"},
		{HostGateway, 11435, false, ""},
		{HostGateway, 443, true, ""},
		{"192.168.1.20", 8000, false, "192.168.1.20:8000"},
		{"192.168.1.20", 8000, true, "192.168.1.20:8000"},
		{"192.168.1.20", 443, true, ""},
		{"[fd00::5]", 8080, true, "[fd00::5]:8080"},
		{"fd00::5", 8081, true, ""},
		{"203.0.113.9", 443, true, "203.0.113.0/24"},
		{"203.0.113.9", 8000, false, ""},
		{"evil.test", 8080, false, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s:%d/connect=%v", tt.host, tt.port, tt.connect), func(t *testing.T) {
			rule, ok := p.Allows(tt.host, tt.port, tt.connect)
			if rule != tt.rule || ok != (tt.rule != "") {
				t.Fatalf("got %q, %v; want %q", rule, ok, tt.rule)
			}
		})
	}
}

// TestHostGatewayException: only host.docker.internal, only on its
// entry's port, only at a private address.
func TestHostGatewayException(t *testing.T) {
	p := portPolicy(t)
	tests := []struct {
		host string
		port uint16
		addr string
		rule string
		ok   bool
	}{
		{HostGateway, 11434, "172.17.0.1", HostGatewayRule, true},
		{HostGateway, 11434, "fd00::1", HostGatewayRule, true},
		{HostGateway, 11434, "127.0.0.1", "", false},
		{HostGateway, 11434, "169.254.169.254", "", false},
		{HostGateway, 11434, "100.64.0.1", "", false},
		{HostGateway, 8080, "172.17.0.1", "", false},
		{"models.lan", 11434, "172.17.0.1", "", false},
		{"models.lan", 11434, "192.168.1.20", "192.168.1.20:8000", true},
		{HostGateway, 11434, "198.51.100.1", "", false},
		{HostGateway, 11434, "8.8.8.8", "", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s:%d@%s", tt.host, tt.port, tt.addr), func(t *testing.T) {
			rule, reason, ok := p.CheckDialAddr(tt.host, tt.port, netip.MustParseAddr(tt.addr))
			if rule != tt.rule || ok != tt.ok {
				t.Fatalf("got %q, %q, %v; want %q, %v", rule, reason, ok, tt.rule, tt.ok)
			}
		})
	}
}

func TestMayDial(t *testing.T) {
	p := portPolicy(t)
	for ap, want := range map[string]bool{
		"172.17.0.1:11434":  true,  // the host gateway's port
		"172.17.0.1:8080":   false, // private, and no host-gateway entry on 8080
		"8.8.8.8:8080":      true,  // public, a rule names 8080
		"8.8.8.8:22":        false, // no rule opens 22
		"192.168.1.20:8000": true,
		"127.0.0.1:11434":   false,
	} {
		if _, got := p.MayDial(netip.MustParseAddrPort(ap)); got != want {
			t.Errorf("MayDial(%s) = %v, want %v", ap, got, want)
		}
	}
}

func TestDialPorts(t *testing.T) {
	cfg := NewConfig([]string{".allowed.test", "models.lan:11434", HostGateway + ":8000"}, []string{"192.168.1.20:8000", "[fd00::5]:8080"})
	if diff := cmp.Diff([]uint16{80, 443, 8000, 8080, 11434}, cfg.DialPorts()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestPortsFor(t *testing.T) {
	p := portPolicy(t)
	for rule, want := range map[string]string{
		".allowed.test":     "HTTP 80, 443; CONNECT 443",
		"models.lan:11434":  "11434",
		"192.168.1.20:8000": "8000",
	} {
		if got := p.PortsFor(rule); got != want {
			t.Errorf("PortsFor(%q) = %q, want %q", rule, got, want)
		}
	}
}
