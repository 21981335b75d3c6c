package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// dialTarget connects to one of t's checked addresses, in order. The
// address string handed to the dialer is an IP literal, so no second
// lookup can happen: the threat is DNS rebinding, a resolver that answers
// with a public address for the check and an internal one for the dial.
func (g *Gateway) dialTarget(ctx context.Context, t *target) (net.Conn, netip.Addr, error) {
	var errs []error
	for _, a := range t.addrs {
		c, err := g.dial(ctx, "tcp", netip.AddrPortFrom(a, t.port).String())
		if err == nil {
			return c, a, nil
		}
		errs = append(errs, err)
	}
	return nil, t.addrs[0], fmt.Errorf("dialing %s: %w", t.host, errors.Join(errs...))
}

// control runs on the socket right before connect(2) and checks the
// address once more, so that no code path (a future change, a transport
// that dials on its own) can reach an address the policy refuses.
func (g *Gateway) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to dial %q: not an address literal", address)
	}
	if reason, ok := g.policy.MayDial(ap); !ok {
		return fmt.Errorf("refusing to dial %s: %s", ap, reason)
	}
	return nil
}
