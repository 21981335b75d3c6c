//go:build linux

package probe

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The host's addresses, as seen from inside the container, read from /proc
// rather than netlink (the sandbox may refuse netlink sockets, and reading
// a file sends nothing).

// ifaceAddr is one address of this network namespace with its prefix.
type ifaceAddr struct {
	Iface  string
	Prefix netip.Prefix // the address and its prefix length
}

// parseFibLocal returns the addresses /proc/net/fib_trie marks as this
// namespace's own ("/32 host LOCAL" under a "|-- ADDR" leaf).
func parseFibLocal(data []byte) []netip.Addr {
	var out []netip.Addr
	var leaf netip.Addr
	for _, l := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(l)
		if a, ok := strings.CutPrefix(t, "|-- "); ok {
			leaf, _ = netip.ParseAddr(strings.TrimSpace(a))
			continue
		}
		if strings.HasPrefix(t, "/32 host LOCAL") && leaf.IsValid() && !slices.Contains(out, leaf) {
			out = append(out, leaf)
		}
	}
	return out
}

// parseIfInet6 reads /proc/net/if_inet6: address (32 hex), ifindex, prefix
// length (hex), scope, flags, device.
func parseIfInet6(data []byte) ([]ifaceAddr, error) {
	var out []ifaceAddr
	for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		b, err := hex.DecodeString(f[0])
		plen, err2 := strconv.ParseUint(f[2], 16, 8)
		if err != nil || err2 != nil || len(b) != 16 || plen > 128 {
			return nil, fmt.Errorf("parsing /proc/net/if_inet6 line %d: %q", i+1, l)
		}
		out = append(out, ifaceAddr{Iface: f[5], Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte(b)), int(plen))})
	}
	return out, nil
}

// firstHost is the first host address of p's subnet: where Docker's IPAM
// puts a network's gateway, the host's address on a bridge network. It is
// false for subnets too small to have one (/31, /32, /127, /128).
func firstHost(p netip.Prefix) (netip.Addr, bool) {
	if p.Bits() >= p.Addr().BitLen()-1 {
		return netip.Addr{}, false
	}
	return p.Masked().Addr().Next(), true
}

// computeHostAddrs derives the host's candidate addresses from the
// namespace's on-link IPv4 routes and its IPv6 prefixes: the first host
// address of each subnet, never one of the namespace's own addresses, and
// only private addresses (a public one would be a router off this machine,
// which no probe may aim at). Loopback and link-local are left out.
func computeHostAddrs(rs []route, v6 []ifaceAddr, own []netip.Addr) []netip.Addr {
	var subnets []netip.Prefix
	for _, r := range rs {
		if r.Iface != "lo" && r.Prefix.Addr().Is4() && r.Prefix.Bits() > 0 && !r.Gateway.IsValid() {
			subnets = append(subnets, r.Prefix)
		}
	}
	for _, a := range v6 {
		own = append(own, a.Prefix.Addr())
		if a.Iface != "lo" && !a.Prefix.Addr().IsLinkLocalUnicast() {
			subnets = append(subnets, a.Prefix.Masked())
		}
	}
	var out []netip.Addr
	for _, p := range subnets {
		h, ok := firstHost(p)
		if ok && h.IsPrivate() && !slices.Contains(own, h) && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// hostAddrs returns the host's addresses: the context's list when the
// harness gave one, otherwise the computed candidates.
func hostAddrs(c *Context) ([]netip.Addr, error) {
	if len(c.HostAddresses) > 0 {
		var out []netip.Addr
		for _, s := range c.HostAddresses {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("host address %q: %w", s, err)
			}
			out = append(out, a)
		}
		return out, nil
	}
	rs, err := routes()
	if err != nil {
		return nil, fmt.Errorf("reading the routing table: %w", err)
	}
	var own []netip.Addr
	if data, err := os.ReadFile("/proc/net/fib_trie"); err == nil {
		own = parseFibLocal(data)
	}
	var v6 []ifaceAddr
	if data, err := os.ReadFile("/proc/net/if_inet6"); err == nil { // absent: IPv6 disabled
		if v6, err = parseIfInet6(data); err != nil {
			return nil, err
		}
	}
	return computeHostAddrs(rs, v6, own), nil
}
