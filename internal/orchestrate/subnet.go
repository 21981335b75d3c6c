package orchestrate

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// DefaultSubnetPool is where each run's networks get their subnets unless
// the user names another pool. 10.213.0.0/16 is private (RFC 1918), outside
// Docker's default pools (172.17.0.0/16–172.31.0.0/16 and 192.168.0.0/16,
// which the engine hands to every other network), outside the ranges home
// routers and VPNs usually take (10.0.x, 10.1.x, 10.10.x, 192.168.x) and
// outside Kubernetes' and Podman's defaults (10.42/10.43, 10.88, 10.96/12,
// 10.244); 100.64.0.0/10 is not used because the gateway classifies
// carrier-grade NAT space on its own. It holds 4,096 /28s: 2,048 runs.
const DefaultSubnetPool = "10.213.0.0/16"

// SubnetBits is the prefix length of each network of a run: 14 addresses,
// for the engine's gateway address and at most three containers.
const SubnetBits = 28

// ErrSubnetPoolExhausted means no /28 of the pool is free: other networks,
// the host's own addresses and routes, or the engine's refusals took them.
var ErrSubnetPoolExhausted = errors.New("no free subnet left in the pool")

// privateRanges are the RFC 1918 ranges a pool must lie in. Threat: a pool
// in public space would route a run's traffic for those addresses to its
// own containers instead of the real hosts (and the gateway treats private
// destinations as never allowed unless the spec names them).
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// ParseSubnetPool reads a pool in CIDR notation: IPv4, without host bits,
// inside a private range (RFC 1918), and large enough for the two /28s of
// one run.
func ParseSubnetPool(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("subnet pool %q: want an IPv4 range in CIDR notation, e.g. %s", s, DefaultSubnetPool)
	}
	if err := checkPool(p); err != nil {
		return netip.Prefix{}, fmt.Errorf("subnet pool %q: %w", s, err)
	}
	return p, nil
}

func checkPool(p netip.Prefix) error {
	switch {
	case !p.Addr().Is4():
		return errors.New("want an IPv4 range (the sandbox networks are IPv4 only)")
	case p.Masked() != p:
		return fmt.Errorf("has host bits set; did you mean %s?", p.Masked())
	case p.Bits() > SubnetBits-1:
		return fmt.Errorf("too small: a run needs two /%d subnets, so the pool must be /%d or larger", SubnetBits, SubnetBits-1)
	}
	for _, r := range privateRanges {
		if r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
			return nil
		}
	}
	return errors.New("not inside a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)")
}

// subnetAllocator hands out the /28s of a pool in order from a starting
// one, wrapping around, and never one that overlaps a taken prefix. Its
// methods may be called from several goroutines.
type subnetAllocator struct {
	mu    sync.Mutex
	pool  netip.Prefix
	taken []netip.Prefix
	next  int // index of the next candidate to consider
	tried int // candidates considered so far
	// refused counts the engine's refusals (a subnet taken meanwhile)
	// for the whole run.
	refused int
}

// refuse counts one refusal of the engine and reports whether the run
// may try another subnet.
func (a *subnetAllocator) refuse() (int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refused++
	return a.refused, a.refused < maxRefusals
}

func newSubnetAllocator(pool, first netip.Prefix, taken []netip.Prefix) *subnetAllocator {
	a := &subnetAllocator{pool: pool, taken: append([]netip.Prefix(nil), taken...)}
	if pool.Contains(first.Addr()) {
		a.next = int(offset(pool, first.Addr()) >> (32 - SubnetBits))
	}
	return a
}

// size is the number of /28s in the pool.
func (a *subnetAllocator) size() int { return 1 << (SubnetBits - a.pool.Bits()) }

// Next returns the next free /28 and marks it taken.
func (a *subnetAllocator) Next() (netip.Prefix, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ; a.tried < a.size(); a.tried++ {
		c := a.candidate(a.next)
		a.next = (a.next + 1) % a.size()
		if !a.overlaps(c) {
			a.tried++
			a.taken = append(a.taken, c)
			return c, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w: every /%d of %s is taken by a network or a host route", ErrSubnetPoolExhausted, SubnetBits, a.pool)
}

// Take marks p as taken.
func (a *subnetAllocator) Take(p netip.Prefix) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.taken = append(a.taken, p)
}

func (a *subnetAllocator) candidate(i int) netip.Prefix {
	base := binary.BigEndian.Uint32(a.pool.Addr().AsSlice())
	return netip.PrefixFrom(addr4(base+uint32(i)<<(32-SubnetBits)), SubnetBits)
}

func (a *subnetAllocator) overlaps(c netip.Prefix) bool {
	for _, t := range a.taken {
		if t.Overlaps(c) {
			return true
		}
	}
	return false
}

// firstSubnet is the /28 of the pool a run starts from, chosen by hashing
// its Docker id so that runs started together start far apart.
func firstSubnet(pool netip.Prefix, seed string) netip.Prefix {
	h := fnv.New32a()
	io.WriteString(h, seed)
	a := &subnetAllocator{pool: pool}
	return a.candidate(int(h.Sum32() % uint32(a.size())))
}

// gatewayOf is the subnet's first host: the address Docker's IPAM reserves
// for the bridge, and the one the probe suite takes for the host's.
func gatewayOf(p netip.Prefix) netip.Addr { return p.Addr().Next() }

func offset(pool netip.Prefix, a netip.Addr) uint32 {
	return binary.BigEndian.Uint32(a.AsSlice()) - binary.BigEndian.Uint32(pool.Addr().AsSlice())
}

func addr4(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// takenSubnets is every subnet the engine's networks use.
func takenSubnets(ctx context.Context, e dockerx.Engine) ([]netip.Prefix, error) {
	ns, err := e.ListNetworks(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, n := range ns {
		for _, s := range n.Subnets {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out, nil
}

// HostPrefixes are the IPv4 ranges this host already uses outside the
// run: its interfaces' networks and its routes (default routes aside).
// Threat: a run's subnet over the user's LAN or VPN would shadow it, and
// the run's containers would answer for those hosts.
func HostPrefixes() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("reading the host's addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if p, ok := prefixOf(n); ok {
				out = append(out, p)
			}
		}
	}
	f, err := os.Open("/proc/net/route")
	if errors.Is(err, os.ErrNotExist) {
		return out, nil // not Linux: the interfaces are all we know
	}
	if err != nil {
		return nil, fmt.Errorf("reading the host's routes: %w", err)
	}
	defer f.Close()
	routes, err := parseRoutes(f)
	return append(out, routes...), err
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	a = a.Unmap()
	if !a.Is4() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones).Masked(), true
}

// parseRoutes reads /proc/net/route: destination and mask are hex in the
// host's byte order (little-endian on every platform Docker runs on).
// Default routes (mask 0) are left out: they cover everything.
func parseRoutes(r io.Reader) ([]netip.Prefix, error) {
	var out []netip.Prefix
	sc := bufio.NewScanner(r)
	for line := 0; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if line == 0 || len(f) < 8 {
			continue // the header
		}
		dst, err1 := hexAddr(f[1])
		mask, err2 := hexAddr(f[7])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("reading the host's routes: line %d: %q", line+1, sc.Text())
		}
		bits, _ := net.IPMask(mask.AsSlice()).Size()
		if bits > 0 {
			out = append(out, netip.PrefixFrom(dst, bits).Masked())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the host's routes: %w", err)
	}
	return out, nil
}

func hexAddr(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return netip.Addr{}, fmt.Errorf("bad address %q", s)
	}
	return netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}), nil
}

// pool is the run's subnet pool.
func (in Input) pool() netip.Prefix {
	if in.SubnetPool.IsValid() {
		return in.SubnetPool
	}
	return netip.MustParsePrefix(DefaultSubnetPool)
}

// networks are the run's networks, each on its own /28 of the pool: the
// internal one (where the host takes no address, OptionInhibitIPv4) first,
// then the egress one, from a start hashed from the run's Docker id.
// Session.CreateNetworks moves a network to a later /28 when its subnet
// turns out to be taken.
func (in Input) networks() []dockerx.NetworkSpec {
	var out []dockerx.NetworkSpec
	alloc := newSubnetAllocator(in.pool(), firstSubnet(in.pool(), in.dockerID()), nil)
	add := func(n dockerx.NetworkSpec) {
		sub, _ := alloc.Next() // a valid pool holds at least two
		n.Subnet, n.Gateway = sub.String(), gatewayOf(sub).String()
		out = append(out, n)
	}
	if in.uses(spec.NetInternal) {
		add(dockerx.NetworkSpec{Name: InternalNetwork(in.dockerID()), Internal: true, Labels: in.labels(""),
			Options: map[string]string{dockerx.OptionInhibitIPv4: "true"}})
	}
	if in.uses(spec.NetEgress) {
		add(dockerx.NetworkSpec{Name: EgressNetwork(in.dockerID()), Labels: in.labels("")})
	}
	return out
}

// maxRefusals bounds how many subnets a run's networks may be refused by
// the engine before the run gives up, whatever the pool's size.
const maxRefusals = 64

// subnets prepares the allocation of the plan's networks: every subnet
// the engine's networks and the host already use is taken, and the search
// starts at the plan's first network. Nil when the plan names no subnets
// (the engine's default pools are used).
func (s *Session) subnets(ctx context.Context) (*subnetAllocator, error) {
	if len(s.Plan.Networks) == 0 || s.Plan.Networks[0].Subnet == "" {
		return nil, nil
	}
	pool, err1 := netip.ParsePrefix(s.Plan.SubnetPool)
	first, err2 := netip.ParsePrefix(s.Plan.Networks[0].Subnet)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("creating networks: the plan's subnets: %w", err)
	}
	taken, err := takenSubnets(ctx, s.Engine)
	if err != nil {
		return nil, fmt.Errorf("creating networks: %w", err)
	}
	hostPrefixes := s.HostPrefixes
	if hostPrefixes == nil {
		hostPrefixes = HostPrefixes
	}
	host, err := hostPrefixes()
	if err != nil {
		return nil, fmt.Errorf("creating networks: %w", err)
	}
	return newSubnetAllocator(pool, first, append(taken, host...)), nil
}

// createNetwork creates n on sub (the allocator's next free /28 when sub
// is not valid), moving on to the next one when the engine answers that
// another network took it meanwhile (a run started at the same moment). n
// records the subnet it got. The networks of a run may be created
// together: the allocator is shared, and so is the budget of refusals.
func (s *Session) createNetwork(ctx context.Context, alloc *subnetAllocator, n *dockerx.NetworkSpec, sub netip.Prefix) (string, error) {
	if alloc == nil {
		return s.Engine.CreateNetwork(ctx, *n)
	}
	for {
		var err error
		if !sub.IsValid() {
			sub, err = alloc.Next()
		}
		if err != nil {
			return "", fmt.Errorf("creating network %s: %w", n.Name, err)
		}
		n.Subnet, n.Gateway = sub.String(), gatewayOf(sub).String()
		id, err := s.Engine.CreateNetwork(ctx, *n)
		if !errors.Is(err, dockerx.ErrSubnetTaken) {
			return id, err
		}
		if refused, more := alloc.refuse(); !more {
			return "", fmt.Errorf("creating network %s: %w: the engine refused %d subnets of %s in a row", n.Name, ErrSubnetPoolExhausted, refused, alloc.pool)
		}
		sub = netip.Prefix{}
	}
}
