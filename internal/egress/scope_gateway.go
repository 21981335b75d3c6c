package egress

import (
	"context"
	"net/http"
	"net/netip"
)

// judgeScope names the scope of the request in d and refuses it when the
// scope does not reach t. Without a scope table it does nothing.
func (g *Gateway) judgeScope(ctx context.Context, d *Decision, t *target) *denial {
	if g.scopes == nil {
		return nil
	}
	v := g.scopes.Judge(ScopeRequest{
		FromSidecar: g.scopes.IsSidecar(ctx, d.Client),
		Claim:       firstOr(d.ScopeClaim, ""),
		Claimed:     len(d.ScopeClaim) > 0,
		Host:        t.host,
		Port:        t.port,
	})
	if len(d.ScopeClaim) > 1 {
		v.Allow, v.Reason = false, "the scope header was sent more than once"
	}
	d.Scope = v.Scope.String()
	if !v.Allow {
		return deny(http.StatusForbidden, "scope %s: %s", d.Scope, v.Reason)
	}
	return nil
}

func firstOr(vs []string, def string) string {
	if len(vs) == 0 {
		return def
	}
	return vs[0]
}

// judgeScopeAddrs refuses the agent an address that a declared server's
// host resolves to, on that server's port, whatever name it asked for.
// The threat: another allowed name (a wildcard's subdomain, a CNAME) that
// resolves to the server, which would let the agent reach it around the
// sidecar's tool filter, pin check and audit.
func (g *Gateway) judgeScopeAddrs(ctx context.Context, d *Decision, t *target, addrs []netip.Addr) *denial {
	if g.scopes == nil || d.Scope != RoleAgent {
		return nil
	}
	for name, hps := range g.scopes.servers {
		for _, hp := range hps {
			if hp.port != t.port || hp.host == t.host {
				continue
			}
			for _, sa := range g.serverAddrs(ctx, hp.host) {
				for _, a := range addrs {
					if a.Unmap() == sa.Unmap() {
						return deny(http.StatusForbidden, "scope %s: %s resolves to %s, the address of declared MCP server %q (%s): only the sidecar reaches it",
							d.Scope, t.host, a.Unmap(), name, hostPortString(hp))
					}
				}
			}
		}
	}
	return nil
}

// serverAddrs are the addresses a server's host stands for: the literal,
// or what the name resolves to now (none when it does not resolve).
func (g *Gateway) serverAddrs(ctx context.Context, host string) []netip.Addr {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	return addrs
}
