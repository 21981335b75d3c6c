package egress

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// Resolver looks host names up; *net.Resolver satisfies it. Tests inject
// their own so that no query leaves the machine and so that they can see
// which names were (never) looked up.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// denial is a request the gateway refuses; reason reaches both the client
// (response body) and the decision log.
type denial struct {
	status int
	reason string
}

func (d *denial) Error() string { return d.reason }

func deny(status int, format string, args ...any) *denial {
	return &denial{status: status, reason: fmt.Sprintf(format, args...)}
}

// target is a destination that passed every check: dial only addrs.
type target struct {
	host  string
	port  uint16
	addrs []netip.Addr // each one checked; IPv4 first
	rule  string
}

// authorize is the gateway's whole allow/resolve/classify decision, in the
// order the design fixes: port syntax, then name and port against the
// rules (before any lookup), then resolution, then every resolved
// address. It fills d as it learns things.
func (g *Gateway) authorize(ctx context.Context, d *Decision, connect bool, rawHost, rawPort string) (*target, *denial) {
	host, err := netpolicy.NormalizeHost(rawHost)
	if err != nil {
		return nil, deny(403, "invalid host: %v", err)
	}
	d.Host = host
	p, err := strconv.ParseUint(rawPort, 10, 16)
	if err != nil || p == 0 {
		return nil, deny(403, "port %q is not a port number", rawPort)
	}
	t := &target{host: host, port: uint16(p)}
	d.Port = t.port
	if dn := g.judgeScope(ctx, d, t); dn != nil {
		return nil, dn
	}
	if lit, err := netip.ParseAddr(host); err == nil {
		if dn := g.judgeScopeAddrs(ctx, d, t, []netip.Addr{lit}); dn != nil {
			return nil, dn
		}
		return g.authorizeLiteral(d, t, lit, connect)
	}
	var dn *denial
	if t.rule, dn = g.matchName(t, connect); dn != nil {
		return nil, dn
	}
	addrs, dn := g.resolve(ctx, host)
	if dn != nil {
		return nil, dn
	}
	ipRule, dn := g.checkAddrs(d, t, addrs)
	if dn != nil {
		return nil, dn
	}
	if dn := g.judgeScopeAddrs(ctx, d, t, addrs); dn != nil {
		return nil, dn
	}
	t.addrs = addrs
	d.Rule = joinRules(t.rule, ipRule)
	return t, nil
}

// matchName checks a host name and port against allowed_domains. It runs
// before any lookup: the threat is a denied name leaking out as a DNS
// query (DNS exfiltration from inside the sandbox).
func (g *Gateway) matchName(t *target, connect bool) (string, *denial) {
	if rule, ok := g.policy.MatchNamePort(t.host, t.port, connect); ok {
		return rule, nil
	}
	rule, ok := g.policy.MatchName(t.host)
	if !ok {
		return "", deny(403, "host %s is not in allowed_domains", t.host)
	}
	return "", deny(403, "%s to port %d is not allowed for %s: its rule %q opens %s; to open this port add %q to allowed_domains",
		kind(connect), t.port, t.host, rule, g.policy.PortsFor(rule), fmt.Sprintf("%s:%d", t.host, t.port))
}

func kind(connect bool) string {
	if connect {
		return "CONNECT"
	}
	return "HTTP"
}

// authorizeLiteral admits an IP-literal target only when
// allowed_ip_addresses covers it on this port: a literal bypasses every
// name rule.
func (g *Gateway) authorizeLiteral(d *Decision, t *target, a netip.Addr, connect bool) (*target, *denial) {
	d.ResolvedIP = a.Unmap().String()
	rule, ok := g.policy.AllowsAddrPort(a, t.port, connect)
	if !ok {
		if other, covered := g.policy.AllowsAddr(a); covered {
			return nil, deny(403, "%s to port %d is not allowed for IP literal %s: its rule %q opens %s", kind(connect), t.port, a, other, g.policy.PortsFor(other))
		}
		return nil, deny(403, "IP literal %s is not in allowed_ip_addresses", a)
	}
	t.addrs = []netip.Addr{a.Unmap()}
	t.rule = rule
	d.Rule = rule
	return t, nil
}

func (g *Gateway) resolve(ctx context.Context, host string) ([]netip.Addr, *denial) {
	ctx, cancel := context.WithTimeout(ctx, g.limits.ResolveTimeout)
	defer cancel()
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, deny(502, "resolving %s: %v", host, err)
	}
	if len(addrs) == 0 {
		return nil, deny(502, "resolving %s: no addresses", host)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		// Go's resolver may hand IPv4 answers back IPv4-mapped; the mapped
		// and plain forms reach the same host, and the plain form is the
		// one the classifier judges (and the one dialed).
		out = append(out, a.Unmap())
	}
	slices.SortStableFunc(out, func(a, b netip.Addr) int { return cmp.Compare(a.BitLen(), b.BitLen()) })
	return slices.Compact(out), nil
}

// checkAddrs refuses the request when any resolved address is refused, so
// a name that answers with one public and one internal address (a DNS
// rebinding pattern) cannot reach either. It returns the IP rule that was
// needed, if any ("host-gateway" for the Docker host's address reached
// through a host.docker.internal:PORT entry).
func (g *Gateway) checkAddrs(d *Decision, t *target, addrs []netip.Addr) (string, *denial) {
	var rules []string
	for _, a := range addrs {
		rule, reason, ok := g.policy.CheckDialAddr(t.host, t.port, a)
		if !ok {
			d.ResolvedIP = a.String()
			return "", deny(403, "%s resolved to a refused address: %s", d.Host, reason)
		}
		if rule != "" && !slices.Contains(rules, rule) {
			rules = append(rules, rule)
		}
	}
	d.ResolvedIP = addrs[0].String()
	return strings.Join(rules, " "), nil
}

func joinRules(name, ip string) string {
	if ip == "" {
		return name
	}
	return name + " " + ip
}
