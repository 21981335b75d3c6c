package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Default ports, as the seed's Squid configuration allowed them. They
// apply to every rule written without a port.
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
	exact        map[string][]DomainRule // name -> rules naming exactly it
	suffix       map[string][]DomainRule // name -> ".name" rules
	ips          []IPRule
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
	p := &Policy{exact: map[string][]DomainRule{}, suffix: map[string][]DomainRule{}}
	for i, s := range c.AllowedDomains {
		d, err := ParseDomainRule(s)
		if err != nil {
			return nil, fmt.Errorf("allowed_domains[%d]: %w", i, err)
		}
		p.addDomain(d)
	}
	for i, s := range c.AllowedIPs {
		r, err := ParseIPRule(s)
		if err != nil {
			return nil, fmt.Errorf("allowed_ip_addresses[%d]: %w", i, err)
		}
		p.ips = append(p.ips, r)
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
	m := p.exact
	if d.Subdomains {
		m = p.suffix
	}
	if !slices.Contains(m[d.Name], d) {
		m[d.Name] = append(m[d.Name], d)
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

// DialPorts is every port a gateway under c may connect to: the default
// ports and the port of every entry that names one. The gateway's
// Landlock rule is built from it.
func (c Config) DialPorts() []uint16 {
	ports := slices.Concat(c.HTTPPorts, c.ConnectPorts)
	for _, s := range c.AllowedDomains {
		if r, err := ParseDomainRule(s); err == nil && r.Port != 0 {
			ports = append(ports, r.Port)
		}
	}
	for _, s := range c.AllowedIPs {
		if r, err := ParseIPRule(s); err == nil && r.Port != 0 {
			ports = append(ports, r.Port)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// portOK reports whether a rule with port rulePort (0: the defaults)
// opens port for plain HTTP or, when connect, for CONNECT.
func (p *Policy) portOK(rulePort, port uint16, connect bool) bool {
	switch {
	case rulePort != 0:
		return port == rulePort
	case connect:
		return slices.Contains(p.connectPorts, port)
	default:
		return slices.Contains(p.httpPorts, port)
	}
}

// nameRules lists the rules matching the normalised name h, most specific
// name first; nil when h is not a name or matches nothing.
func (p *Policy) nameRules(host string) []DomainRule {
	h, err := NormalizeHost(host)
	if err != nil {
		return nil
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	out := slices.Clone(p.exact[h])
	for name := h; ; {
		out = append(out, p.suffix[name]...)
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return out
		}
		name = name[i+1:]
	}
}

// MatchName reports whether the host name is allowed by a domain rule on
// some port, and which one (the most specific). The host is normalised
// first; a host that does not normalise, or is an IP literal, never
// matches a name rule.
func (p *Policy) MatchName(host string) (rule string, ok bool) {
	rs := p.nameRules(host)
	if len(rs) == 0 {
		return "", false
	}
	return rs[0].String(), true
}

// MatchNamePort is [Policy.MatchName] for one port: plain HTTP, or
// CONNECT when connect is set. A rule that names this port is preferred
// over one that opens it as a default port.
func (p *Policy) MatchNamePort(host string, port uint16, connect bool) (rule string, ok bool) {
	var dflt string
	for _, r := range p.nameRules(host) {
		if !p.portOK(r.Port, port, connect) {
			continue
		}
		if r.Port != 0 {
			return r.String(), true
		}
		if dflt == "" {
			dflt = r.String()
		}
	}
	return dflt, dflt != ""
}

// Allows is the name stage of a request for host:port (plain HTTP, or
// CONNECT when connect is set): a name must match an allowed_domains rule
// that opens the port, an IP literal an allowed_ip_addresses rule that
// does. rule is the entry that allows it. Where the name resolves to is
// decided later ([Policy.CheckDialAddr]); this is the check that needs no
// lookup, which the agent's preflight hints use too.
func (p *Policy) Allows(host string, port uint16, connect bool) (rule string, ok bool) {
	h, err := NormalizeHost(host)
	if err != nil {
		return "", false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return p.AllowsAddrPort(a, port, connect)
	}
	return p.MatchNamePort(h, port, connect)
}

// PortsFor describes the ports a rule opens, for messages: "8080" or
// "HTTP 80, 443; CONNECT 443".
func (p *Policy) PortsFor(rule string) string {
	if r, err := ParseDomainRule(rule); err == nil && r.Port != 0 {
		return fmt.Sprint(r.Port)
	}
	if r, err := ParseIPRule(rule); err == nil && r.Port != 0 {
		return fmt.Sprint(r.Port)
	}
	return fmt.Sprintf("HTTP %s; CONNECT %s", joinPorts(p.httpPorts), joinPorts(p.connectPorts))
}

func joinPorts(ps []uint16) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, v := range ps {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}

// AllowsAddr reports whether allowed_ip_addresses covers a (on any port),
// and by which rule. An IPv4-mapped address is covered by the rule
// covering its IPv4 form: on a dual-stack socket it is the same
// destination.
func (p *Policy) AllowsAddr(a netip.Addr) (rule string, ok bool) {
	if !a.IsValid() || a.Zone() != "" {
		return "", false
	}
	for _, r := range p.ips {
		if r.Prefix.Contains(a) || r.Prefix.Contains(a.Unmap()) {
			return r.String(), true
		}
	}
	return "", false
}

// AllowsAddrPort is [Policy.AllowsAddr] for an IP-literal request to
// port: the covering rule must open it.
func (p *Policy) AllowsAddrPort(a netip.Addr, port uint16, connect bool) (rule string, ok bool) {
	if !a.IsValid() || a.Zone() != "" {
		return "", false
	}
	var dflt string
	for _, r := range p.ips {
		if !(r.Prefix.Contains(a) || r.Prefix.Contains(a.Unmap())) || !p.portOK(r.Port, port, connect) {
			continue
		}
		if r.Port != 0 {
			return r.String(), true
		}
		if dflt == "" {
			dflt = r.String()
		}
	}
	return dflt, dflt != ""
}

// CheckAddr decides whether the gateway may dial a (a resolved or literal
// address): yes when allowed_ip_addresses covers it explicitly (rule names
// the prefix), or when it is [Public] (rule is empty). Otherwise reason
// says why not. The threat is a permitted name resolving to loopback,
// the metadata service or a private network (DNS rebinding, SSRF). For a
// resolved address the port was opened by the name's rule, so any IP rule
// covering a counts, whatever its port.
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

// CheckDialAddr is [Policy.CheckAddr] for an address the name host
// resolved to, on port. Its one exception: [HostGateway] with an entry
// naming this port may be dialled at a [Private] address (the Docker
// host's bridge address), and rule is then [HostGatewayRule]. No other
// class is opened: the threat is a forged answer for the name steering
// the gateway to loopback or the metadata service.
func (p *Policy) CheckDialAddr(host string, port uint16, a netip.Addr) (rule, reason string, ok bool) {
	rule, reason, ok = p.CheckAddr(a)
	if ok || host != HostGateway || !p.hostGatewayPort(port) || Classify(a) != Private {
		return rule, reason, ok
	}
	return HostGatewayRule, "", true
}

func (p *Policy) hostGatewayPort(port uint16) bool {
	return slices.ContainsFunc(p.exact[HostGateway], func(r DomainRule) bool { return r.Port == port })
}

// MayDial is the socket-level last check: the address passes
// [Policy.CheckAddr] (or is a [Private] address and a [HostGateway] entry
// names the port), and some rule opens the port.
func (p *Policy) MayDial(ap netip.AddrPort) (reason string, ok bool) {
	a, port := ap.Addr(), ap.Port()
	_, reason, ok = p.CheckAddr(a)
	if !ok && !(p.hostGatewayPort(port) && Classify(a) == Private) {
		return reason, false
	}
	if !p.anyRuleOpens(port) {
		return fmt.Sprintf("no rule opens port %d", port), false
	}
	return "", true
}

func (p *Policy) anyRuleOpens(port uint16) bool {
	if p.AllowsHTTPPort(port) || p.AllowsConnectPort(port) {
		return true
	}
	for _, rs := range []map[string][]DomainRule{p.exact, p.suffix} {
		for _, list := range rs {
			if slices.ContainsFunc(list, func(r DomainRule) bool { return r.Port == port }) {
				return true
			}
		}
	}
	return slices.ContainsFunc(p.ips, func(r IPRule) bool { return r.Port == port })
}

// AllowsHTTPPort reports whether plain HTTP may reach port under a rule
// without a port.
func (p *Policy) AllowsHTTPPort(port uint16) bool {
	return slices.Contains(p.httpPorts, port)
}

// AllowsConnectPort reports whether a CONNECT tunnel may reach port under
// a rule without a port.
func (p *Policy) AllowsConnectPort(port uint16) bool {
	return slices.Contains(p.connectPorts, port)
}
