//go:build linux

package egress

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// FuzzAuthorize: whatever the target and whatever the resolver answers,
// an authorized target only ever lists addresses the policy allows, on an
// allowed port, and a name the allowlist refuses is never looked up.
func FuzzAuthorize(f *testing.F) {
	for _, s := range []string{"api.allowed.test", "exact.example", "denied.test", "127.0.0.1", "[::1]", "2130706433",
		"API.ALLOWED.TEST.", "xn--llowed-2nf.test", "a..allowed.test", "::ffff:127.0.0.1", "allowed.test%00.evil.example"} {
		f.Add(s, "443", true, []byte{127, 0, 0, 1})
		f.Add(s, "80", false, []byte{93, 184, 215, 14})
	}
	f.Add("api.allowed.test", "443", true, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 169, 254})
	p, err := netpolicy.Compile(testConfig(true))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, port string, connect bool, answer []byte) {
		a, ok := netip.AddrFromSlice(answer)
		if !ok {
			return
		}
		res := &anyResolver{addr: a}
		g := &Gateway{policy: p, resolver: res, limits: DefaultLimits()}
		var d Decision
		tg, dn := g.authorize(context.Background(), &d, connect, host, port)
		if dn != nil {
			if dn.reason == "" {
				t.Fatal("denial without a reason")
			}
			if strings.Contains(dn.reason, "not in allowed_domains") && len(res.lookups) != 0 {
				t.Fatalf("denied name %q was looked up", host)
			}
			return
		}
		if connect && !p.AllowsConnectPort(tg.port) || !connect && !p.AllowsHTTPPort(tg.port) {
			t.Fatalf("authorized port %d", tg.port)
		}
		for _, addr := range tg.addrs {
			if _, reason, ok := p.CheckAddr(addr); !ok {
				t.Fatalf("authorized %q -> %s: %s", host, addr, reason)
			}
		}
		if _, ok := p.MatchName(tg.host); !ok && len(res.lookups) != 0 {
			t.Fatalf("looked up %q, which no rule allows", tg.host)
		}
	})
}
