//go:build linux

package probe

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fibTrie is /proc/net/fib_trie of a container on two networks (trimmed).
const fibTrie = `Main:
  +-- 0.0.0.0/0 3 0 5
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 172.18.0.0/16 2 0 2
        +-- 172.18.0.0/30 2 0 2
           |-- 172.18.0.0
              /16 link UNICAST
           |-- 172.18.0.3
              /32 host LOCAL
        |-- 172.18.255.255
           /32 link BROADCAST
     |-- 192.168.32.4
        /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
           |-- 172.18.0.3
              /32 host LOCAL
`

const ifInet6 = `fd00000000000000000000000000000a 04 40 00 00     eth0
00000000000000000000000000000001 01 80 10 80       lo
fe8000000000000000fc00fffe000001 04 40 20 80     eth0
20010db8000000000000000000000005 05 40 00 00     eth1
`

func TestParseIfInet6(t *testing.T) {
	got, err := parseIfInet6([]byte(ifInet6))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].Prefix != netip.MustParsePrefix("fd00::a/64") || got[0].Iface != "eth0" {
		t.Errorf("got %v, want fd00::a/64 on eth0 first of 4", got)
	}
	if _, err := parseIfInet6([]byte("zz 04 40 00 00 eth0")); err == nil {
		t.Error("malformed line accepted")
	}
}

func TestComputeHostAddrs(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	v6, err := parseIfInet6([]byte(ifInet6))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		routes []route
		v6     []ifaceAddr
		own    []netip.Addr
		want   []netip.Addr
	}{
		{"internal network: the subnet's first host", []route{{Iface: "eth0", Prefix: p("172.18.0.0/16")}}, nil,
			[]netip.Addr{a("172.18.0.3")}, []netip.Addr{a("172.18.0.1")}},
		{"two networks, a default route's next hop is not a subnet",
			[]route{{Iface: "eth0", Prefix: p("0.0.0.0/0"), Gateway: a("172.17.0.1")}, {Iface: "eth0", Prefix: p("172.17.0.0/16")},
				{Iface: "eth1", Prefix: p("10.89.3.0/24")}}, nil,
			nil, []netip.Addr{a("172.17.0.1"), a("10.89.3.1")}},
		{"the container's own first address is never a target", []route{{Iface: "eth0", Prefix: p("172.18.0.0/16")}}, nil,
			[]netip.Addr{a("172.18.0.1")}, nil},
		{"public subnet: its router is off the machine", []route{{Iface: "eth0", Prefix: p("198.51.100.0/24")}}, nil, nil, nil},
		{"point-to-point and host routes have no first host",
			[]route{{Iface: "eth0", Prefix: p("10.0.0.0/31")}, {Iface: "eth0", Prefix: p("10.0.0.9/32")}}, nil, nil, nil},
		{"loopback is not a network", []route{{Iface: "lo", Prefix: p("127.0.0.0/8")}}, nil, nil, nil},
		{"IPv6: unique-local prefix only (not link-local, loopback or global)", nil, v6, nil, []netip.Addr{a("fd00::1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computeHostAddrs(tt.routes, tt.v6, tt.own)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("host addresses mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostAddrsFromContext(t *testing.T) {
	c := DefaultContext()
	c.HostAddresses = []string{"10.200.0.1", "fd12::1"}
	got, err := hostAddrs(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != netip.MustParseAddr("10.200.0.1") {
		t.Errorf("got %v, want the context's list", got)
	}
}
