package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Default ports, as the seed's Squid configuration allowed them.
var (
	DefaultHTTPPorts    = []uint16{80, 443}
	DefaultConnectPorts = []uint16{443}
)

// NewConfig is a [Config] with the default ports, for the given rules.
func NewConfig(domains, ips []string) Config {
	return Config{
		Schema:         ConfigSchema,
		AllowedDomains: domains,
		AllowedIPs:     ips,
		HTTPPorts:      slices.Clone(DefaultHTTPPorts),
		ConnectPorts:   slices.Clone(DefaultConnectPorts),
	}
}

// Policy is a compiled [Config]: the decisions the gateway asks for.
// It is immutable and safe for concurrent use.
type Policy struct {
	exact        map[string]string // name -> rule that allows exactly it
	suffix       map[string]string // name -> ".name" rule
	prefixes     []netip.Prefix
	httpPorts    []uint16
	connectPorts []uint16
}

// Compile validates c and builds its [Policy]. Every rule is re-parsed, so
// a hand-edited gateway-policy.json cannot smuggle in what the spec
// validator would refuse.
func Compile(c Config) (*Policy, error) {
	if c.Schema != "" && c.Schema != ConfigSchema {
		return nil, fmt.Errorf("gateway policy schema %q: want %q", c.Schema, ConfigSchema)
	}
	p := &Policy{exact: map[string]string{}, suffix: map[string]string{}}
	for i, s := range c.AllowedDomains {
		d, err := ParseDomainRule(s)
		if err != nil {
			return nil, fmt.Errorf("allowed_domains[%d]: %w", i, err)
		}
		p.addDomain(d)
	}
	for i, s := range c.AllowedIPs {
		pf, err := ParseIPRule(s)
		if err != nil {
			return nil, fmt.Errorf("allowed_ip_addresses[%d]: %w", i, err)
		}
		p.prefixes = append(p.prefixes, pf)
	}
	var err error
	if p.httpPorts, err = checkPorts("http_ports", c.HTTPPorts); err != nil {
		return nil, err
	}
	if p.connectPorts, err = checkPorts("connect_ports", c.ConnectPorts); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Policy) addDomain(d DomainRule) {
	if d.Subdomains {
		p.suffix[d.Name] = d.String()
		return
	}
	if _, ok := p.exact[d.Name]; !ok {
		p.exact[d.Name] = d.String()
	}
}

func checkPorts(key string, ports []uint16) ([]uint16, error) {
	if slices.Contains(ports, 0) {
		return nil, fmt.Errorf("%s: port 0 is not a port", key)
	}
	out := slices.Clone(ports)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// MatchName reports whether the host name is allowed by a domain rule, and
// which one (the most specific). The host is normalised first; a host that
// does not normalise, or is an IP literal, never matches a name rule.
func (p *Policy) MatchName(host string) (rule string, ok bool) {
	h, err := NormalizeHost(host)
	if err != nil {
		return "", false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", false
	}
	if r, ok := p.exact[h]; ok {
		return r, true
	}
	for name := h; ; {
		if r, ok := p.suffix[name]; ok {
			return r, true
		}
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return "", false
		}
		name = name[i+1:]
	}
}

// AllowsAddr reports whether allowed_ip_addresses covers a, and by which
// prefix. An IPv4-mapped address is covered by the rule covering its IPv4
// form: on a dual-stack socket it is the same destination.
func (p *Policy) AllowsAddr(a netip.Addr) (rule string, ok bool) {
	if !a.IsValid() || a.Zone() != "" {
		return "", false
	}
	for _, pf := range p.prefixes {
		if pf.Contains(a) || pf.Contains(a.Unmap()) {
			return pf.String(), true
		}
	}
	return "", false
}

// CheckAddr decides whether the gateway may dial a (a resolved or literal
// address): yes when allowed_ip_addresses covers it explicitly (rule names
// the prefix), or when it is [Public] (rule is empty). Otherwise reason
// says why not. The threat is a permitted name resolving to loopback,
// the metadata service or a private network (DNS rebinding, SSRF).
func (p *Policy) CheckAddr(a netip.Addr) (rule string, reason string, ok bool) {
	if r, ok := p.AllowsAddr(a); ok {
		return r, "", true
	}
	if a.IsValid() && a.Zone() != "" {
		return "", fmt.Sprintf("address %s has a zone", a), false
	}
	c := Classify(a)
	if c == Public {
		return "", "", true
	}
	return "", fmt.Sprintf("%s address %s is not in allowed_ip_addresses", c, a), false
}

// AllowsHTTPPort reports whether plain HTTP may reach port.
func (p *Policy) AllowsHTTPPort(port uint16) bool {
	return slices.Contains(p.httpPorts, port)
}

// AllowsConnectPort reports whether a CONNECT tunnel may reach port.
func (p *Policy) AllowsConnectPort(port uint16) bool {
	return slices.Contains(p.connectPorts, port)
}
