//go:build linux

package probe

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const route4 = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010011AC	0003	0	0	0	00000000	0	0	0
eth0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
`

const route4Internal = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	000012AC	00000000	0001	0	0	0	0000FFFF	0	0	0
`

const route6 = `fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000001 00000000 00000003     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
`

func TestParseRoutes(t *testing.T) {
	r4, err := parseRoutes4([]byte(route4))
	if err != nil {
		t.Fatal(err)
	}
	want := []route{
		{Iface: "eth0", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("172.17.0.1")},
		{Iface: "eth0", Prefix: netip.MustParsePrefix("172.17.0.0/16")},
	}
	if diff := cmp.Diff(want, r4, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("IPv4 routes mismatch (-want +got):\n%s", diff)
	}
	r6, err := parseRoutes6([]byte(route6))
	if err != nil {
		t.Fatal(err)
	}
	if len(r6) != 2 || len(defaultRoutes(r6)) != 1 {
		t.Errorf("IPv6 routes: got %v, want the link-local and one default (the lo reject route dropped)", r6)
	}
	internal, err := parseRoutes4([]byte(route4Internal))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		rs    []route
		addr  string
		found bool
	}{
		{"default route carries a public address", r4, "1.1.1.1", true},
		{"subnet route carries a neighbour", internal, "172.18.0.5", true},
		{"internal network has no route to the world", internal, "1.1.1.1", false},
		{"internal network has no route to metadata", internal, "169.254.169.254", false},
		{"IPv4 routes never carry IPv6", r4, "2001:db8::1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := routeFor(tt.rs, netip.MustParseAddr(tt.addr)); ok != tt.found {
				t.Errorf("routeFor(%s) found=%v, want %v", tt.addr, ok, tt.found)
			}
		})
	}
}

func TestParseRoutesRejectsGarbage(t *testing.T) {
	if _, err := parseRoutes4([]byte("Iface Destination\neth0 ZZZZZZZZ 0 0 0 0 0 00000000\n")); err == nil {
		t.Error("bad IPv4 destination accepted")
	}
	if _, err := parseRoutes6([]byte("xyz 40 0 0 0 0 0 0 0 eth0\n")); err == nil {
		t.Error("bad IPv6 destination accepted")
	}
}

func TestParseHostsAndUnroutable(t *testing.T) {
	hosts := parseHosts([]byte("127.0.0.1 localhost\n0.0.0.0 host.docker.internal Metadata.Google.Internal # black hole\n:: gateway.docker.internal\n172.17.0.1 kubernetes.docker.internal\nbogus line\n"))
	tests := []struct {
		name string
		want bool
	}{
		{"host.docker.internal", true}, {"metadata.google.internal", true}, {"gateway.docker.internal", true},
		{"kubernetes.docker.internal", false}, {"localhost", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs := hosts[tt.name]
			got := len(addrs) > 0
			for _, a := range addrs {
				got = got && unroutable(a)
			}
			if got != tt.want {
				t.Errorf("%s -> %v: black-holed %v, want %v", tt.name, addrs, got, tt.want)
			}
		})
	}
}

func TestDecodeCaps(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"0000000000000000", []string{}},
		{"0000000000003000", []string{"cap_net_admin", "cap_net_raw"}},
		{"0000000000200000", []string{"cap_sys_admin"}},
	}
	for _, tt := range tests {
		got, err := decodeCaps(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("decodeCaps(%s) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
	if _, err := decodeCaps("xyz"); err == nil {
		t.Error("bad mask accepted")
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		declared int64
		want     Outcome
	}{
		{"cgroup v2 no limit", "max\n", 0, Allowed},
		{"cgroup v1 no limit", "9223372036854771712\n", 0, Allowed},
		{"limit set", "268435456\n", 0, Denied},
		{"limit as declared", "268435456\n", 268435456, Denied},
		{"limit above declared", "536870912\n", 268435456, Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseLimit(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := judgeLimit("memory", v, tt.declared, "test"); got.Outcome != tt.want {
				t.Errorf("got %s (%s), want %s", got.Outcome, got.Summary, tt.want)
			}
		})
	}
	if _, err := parseLimit("lots"); err == nil {
		t.Error("bad limit accepted")
	}
}

func TestAggregate(t *testing.T) {
	tests := []struct {
		name string
		in   []Outcome
		want Outcome
	}{
		{"none", nil, NA},
		{"one allowed wins", []Outcome{Denied, Allowed, NA}, Allowed},
		{"all absent", []Outcome{NA, NA}, NA},
		{"denied", []Outcome{Denied, NA, Error}, Denied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var as []Attempt
			for _, o := range tt.in {
				as = append(as, Attempt{Outcome: o})
			}
			if got, _ := aggregate(as); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestReadLimitSnapshot(t *testing.T) {
	snap := &Snapshot{Files: map[string]string{"/nonexistent/memory.max": "268435456\n"}}
	v, src, err := readLimit(snap, "/nonexistent/memory.max")
	if err != nil || v != 268435456 || src != "/nonexistent/memory.max (read before hardening)" {
		t.Errorf("got %d %q %v", v, src, err)
	}
	if _, _, err := readLimit(nil, "/nonexistent/memory.max"); err == nil {
		t.Error("no file and no snapshot: want an error")
	}
	if r := memoryLimit(&Snapshot{Files: map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}}, 0); r.Outcome == Denied {
		t.Errorf("an unlimited snapshot passed: %s", r.Summary)
	}
}
