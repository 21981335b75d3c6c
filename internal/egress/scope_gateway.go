package egress

import (
	"context"
	"net/http"
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
