package inside

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// ProbeGatewayCommand is our binary's hidden command, run by a helper
// container attached to an internal network of the run, that tells
// whether the engine's host holds the network's gateway address
// ([ProbeGateway]).
const ProbeGatewayCommand = "net-probe-gateway"

// Gateway answers of ProbeGateway.
const (
	GatewayUnheld = "unheld" // no host answered for the address (ARP unanswered)
	GatewayHeld   = "held"   // a host answered for the address
)

// ProbeGateway tries one TCP connection to addr (the internal network's
// gateway address and any port) from inside the network and reads the
// kernel's answer: a connection accepted or refused means a host holds
// the address (GatewayHeld); "no route to host", the kernel's answer when
// no one answers the address's ARP, means none does (GatewayUnheld).
// Anything else (a timeout: a host that drops silently would look the
// same as none) establishes nothing and is an error.
func ProbeGateway(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
		c.Close()
		return GatewayHeld, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return GatewayHeld, nil
	case errors.Is(err, syscall.EHOSTUNREACH):
		return GatewayUnheld, nil
	}
	return "", fmt.Errorf("connecting to %s established nothing: %w", addr, err)
}
