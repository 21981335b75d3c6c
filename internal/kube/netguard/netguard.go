// Package netguard builds and installs the agent pod's own network rules:
// an nftables table in the pod's network namespace that lets the agent
// reach loopback, the replies of connections it opened, and TCP to the
// sidecar's and the gateway's service addresses and ports, and drops
// everything else, IPv4 and IPv6, in both directions.
//
// The threat it answers: a Kubernetes NetworkPolicy is only as good as the
// cluster's network plugin, and many clusters (and the test cluster of this
// repository) do not enforce policies at all. These rules hold whatever the
// plugin does. They are installed by a short-lived init container, the
// only container of the run with CAP_NET_ADMIN; the agent container never
// has it, so it cannot change them.
//
// The rules are programmed over netlink with github.com/google/nftables: no
// nft binary is needed in the image. [Program] is pure (the rules as data,
// golden-tested); [Install] sends them to the kernel. Both are Linux-only
// (install_linux.go, rules_linux.go); [Config], [Args] and [Parse] are
// portable, for the host that writes the role's arguments. This package runs in
// a container: it must not import the host's packages (internal/kube,
// orchestrate, dockerx, sandbox, cli).
package netguard

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Role is the hidden subcommand of our binary that installs the rules.
const Role = "netguard"

// FlagAllow names one allowed TCP destination, ADDR:PORT (IPv6 in
// brackets); repeated. The host side builds the init container's
// arguments with [Args], so the flag is named in one place.
const FlagAllow = "allow"

// Dest is one allowed TCP destination.
type Dest = netip.AddrPort

// Config is what the rules allow besides loopback and established
// connections.
type Config struct {
	Allow []Dest
}

// Args is the command line of the init container: the role and one
// --allow per destination.
func Args(c Config) []string {
	out := []string{Role}
	for _, d := range c.Allow {
		out = append(out, "--"+FlagAllow, d.String())
	}
	return out
}

// Parse reads the --allow values. Every entry must be an address and a
// port: a name would need a resolver the pod does not have, and a
// missing port would open every port.
func Parse(allow []string) (Config, error) {
	var c Config
	for i, s := range allow {
		d, err := netip.ParseAddrPort(strings.TrimSpace(s))
		if err != nil {
			return Config{}, fmt.Errorf("--%s #%d %q: want ADDR:PORT ([ADDR]:PORT for IPv6): %w", FlagAllow, i+1, s, err)
		}
		if d.Port() == 0 {
			return Config{}, fmt.Errorf("--%s #%d %q: port 0", FlagAllow, i+1, s)
		}
		if d.Addr().Zone() != "" || d.Addr().IsUnspecified() {
			return Config{}, fmt.Errorf("--%s #%d %q: want one concrete address", FlagAllow, i+1, s)
		}
		c.Allow = append(c.Allow, netip.AddrPortFrom(d.Addr().Unmap(), d.Port()))
	}
	slices.SortFunc(c.Allow, func(a, b Dest) int { return a.Compare(b) })
	c.Allow = slices.Compact(c.Allow)
	return c, nil
}
