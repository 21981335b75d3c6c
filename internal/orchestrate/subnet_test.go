package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

func TestParseSubnetPool(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string // empty: valid
	}{
		{DefaultSubnetPool, ""},
		{"172.29.0.0/16", ""},
		{"192.168.77.0/27", ""},
		{" 10.0.0.0/8 ", ""},
		{"", "CIDR notation"},
		{"10.213.0.0", "CIDR notation"},
		{"ten/16", "CIDR notation"},
		{"10.213.0.1/16", "host bits set; did you mean 10.213.0.0/16?"},
		{"fd00:213::/48", "IPv4"},
		{"8.8.0.0/16", "not inside a private range"},
		{"100.64.0.0/16", "not inside a private range"},
		{"10.0.0.0/7", "not inside a private range"},
		{"10.213.0.0/28", "too small: a run needs two /28 subnets, so the pool must be /27 or larger"},
		{"10.213.0.0/30", "too small"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParseSubnetPool(tt.in)
			if tt.wantErr == "" {
				if err != nil || !p.IsValid() {
					t.Fatalf("got %v, %v, want a valid pool", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// allocate returns what Next hands out until it fails, and that error.
func allocate(a *subnetAllocator) ([]string, error) {
	var got []string
	for {
		p, err := a.Next()
		if err != nil {
			return got, err
		}
		got = append(got, p.String())
	}
}

func TestSubnetAllocator(t *testing.T) {
	pool := netip.MustParsePrefix("10.213.0.0/26") // four /28s
	tests := []struct {
		name  string
		first string
		taken []netip.Prefix
		want  []string
	}{
		{"from the first, wrapping around", "10.213.0.32/28", nil,
			[]string{"10.213.0.32/28", "10.213.0.48/28", "10.213.0.0/28", "10.213.0.16/28"}},
		{"existing networks are skipped", "10.213.0.0/28", prefixes("10.213.0.0/28", "10.213.0.48/28"),
			[]string{"10.213.0.16/28", "10.213.0.32/28"}},
		{"a larger network takes every /28 it covers", "10.213.0.0/28", prefixes("10.213.0.0/27"),
			[]string{"10.213.0.32/28", "10.213.0.48/28"}},
		{"a host route or address inside a /28 takes it", "10.213.0.0/28", prefixes("10.213.0.20/32", "10.213.0.40/30"),
			[]string{"10.213.0.0/28", "10.213.0.48/28"}},
		{"a host route over the whole pool takes everything", "10.213.0.0/28", prefixes("10.0.0.0/8"), nil},
		{"ranges elsewhere change nothing", "10.213.0.0/28", prefixes("172.17.0.0/16", "192.168.1.0/24", "10.214.0.0/28"),
			[]string{"10.213.0.0/28", "10.213.0.16/28", "10.213.0.32/28", "10.213.0.48/28"}},
		{"a first subnet outside the pool starts at the pool's start", "192.168.0.0/28", nil,
			[]string{"10.213.0.0/28", "10.213.0.16/28", "10.213.0.32/28", "10.213.0.48/28"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := allocate(newSubnetAllocator(pool, netip.MustParsePrefix(tt.first), tt.taken))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("subnets mismatch (-want +got):\n%s", diff)
			}
			if !errors.Is(err, ErrSubnetPoolExhausted) || !strings.Contains(err.Error(), pool.String()) {
				t.Errorf("at the end got %v, want ErrSubnetPoolExhausted naming %s", err, pool)
			}
		})
	}
}

func TestGatewayIsFirstHost(t *testing.T) {
	if got := gatewayOf(netip.MustParsePrefix("10.213.7.32/28")); got != netip.MustParseAddr("10.213.7.33") {
		t.Errorf("got %v, want 10.213.7.33 (the probe suite's host address)", got)
	}
}

func TestPlanSubnets(t *testing.T) {
	in := input(t, defaultSpec(t), WorkloadCheck)
	in.SubnetPool = netip.MustParsePrefix("172.29.64.0/27")
	p, err := NewPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.SubnetPool != "172.29.64.0/27" || len(p.Networks) != 2 {
		t.Fatalf("plan pool %q with %d networks, want 172.29.64.0/27 and 2", p.SubnetPool, len(p.Networks))
	}
	got := map[string]string{}
	for _, n := range p.Networks {
		got[n.Subnet] = n.Gateway
	}
	want := map[string]string{"172.29.64.0/28": "172.29.64.1", "172.29.64.16/28": "172.29.64.17"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("subnet -> gateway mismatch (-want +got):\n%s", diff)
	}

	in.SubnetPool = netip.MustParsePrefix("172.29.64.0/28")
	if _, err := NewPlan(in); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("a /28 pool: got %v, want a too-small error", err)
	}
}

// TestPlanStartsSpreadOut: runs started together (different tokens) start
// at different places of the default pool.
func TestPlanStartsSpreadOut(t *testing.T) {
	seen := map[string]bool{}
	for i := range 64 {
		in := input(t, defaultSpec(t), WorkloadCheck)
		in.Token = fmt.Sprintf("%06x", i*7919)
		p, err := NewPlan(in)
		if err != nil {
			t.Fatal(err)
		}
		seen[p.Networks[0].Subnet] = true
	}
	if len(seen) < 60 {
		t.Errorf("64 runs start at %d distinct subnets, want nearly 64", len(seen))
	}
}

func planFor(t *testing.T, pool string) Plan {
	t.Helper()
	in := input(t, defaultSpec(t), WorkloadCheck)
	in.SubnetPool = netip.MustParsePrefix(pool)
	p, err := NewPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func createdSubnets(f *fakeEngine) []string {
	var out []string
	for _, n := range f.CreatedNets {
		out = append(out, n.Subnet+" via "+n.Gateway)
	}
	return out
}

func TestCreateNetworksSkipsTakenSubnets(t *testing.T) {
	f := newFake()
	// Another network already has the first /28, the host routes the third.
	f.Networks = []dockerx.Resource{{Name: "other", Subnets: []string{"10.213.9.0/28", "fd00::/64"}}, {Name: "host"}}
	s := newTestSession(f, planFor(t, "10.213.9.0/26"))
	s.HostPrefixes = func() ([]netip.Prefix, error) { return prefixes("10.213.9.32/29"), nil }
	s.Plan.Networks[0].Subnet = "10.213.9.0/28" // the plan's first choice
	if err := s.CreateNetworks(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.213.9.16/28 via 10.213.9.17", "10.213.9.48/28 via 10.213.9.49"}
	got := createdSubnets(f) // created together: in either order
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if s.Plan.Networks[1].Subnet != "10.213.9.48/28" || s.Networks[1].Subnet != "10.213.9.48/28" {
		t.Errorf("the plan records %s and the session %s, want the subnet used, 10.213.9.48/28",
			s.Plan.Networks[1].Subnet, s.Networks[1].Subnet)
	}
	if !s.Plan.Networks[0].Internal || s.Plan.Networks[0].Options[dockerx.OptionInhibitIPv4] != "true" {
		t.Errorf("the internal network lost its options: %+v", s.Plan.Networks[0])
	}
}

func TestCreateNetworksRetriesWhenTheEngineRefuses(t *testing.T) {
	f := newFake()
	refused := map[string]bool{"10.213.9.0/28": true, "10.213.9.16/28": true}
	f.NetworkErr = func(n dockerx.NetworkSpec) error {
		if refused[n.Subnet] {
			return fmt.Errorf("creating network %s: %w", n.Name, dockerx.ErrSubnetTaken)
		}
		return nil
	}
	s := newTestSession(f, planFor(t, "10.213.9.0/26"))
	s.Plan.Networks[0].Subnet = "10.213.9.0/28"
	if err := s.CreateNetworks(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The two networks are created together: which one gets which of the
	// next two /28s is not fixed, but each records the one it got.
	want := []string{"10.213.9.32/28 via 10.213.9.33", "10.213.9.48/28 via 10.213.9.49"}
	got := createdSubnets(f)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	for i, n := range s.Plan.Networks {
		if n.Subnet != s.Networks[i].Subnet || !slices.Contains(got, n.Subnet+" via "+n.Gateway) {
			t.Errorf("network %s: the plan records %s, the session %s", n.Name, n.Subnet, s.Networks[i].Subnet)
		}
	}
}

func TestCreateNetworksExhausted(t *testing.T) {
	tests := []struct {
		name    string
		pool    string
		refuse  bool
		host    []netip.Prefix
		created int
	}{
		{"room for one network only", "10.213.9.0/27", false, prefixes("10.213.9.16/28"), 1},
		{"the host routes the whole pool", "10.213.0.0/16", false, prefixes("10.0.0.0/8"), 0},
		{"the engine refuses every subnet", "10.213.0.0/16", true, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			var calls atomic.Int32
			f.NetworkErr = func(dockerx.NetworkSpec) error {
				calls.Add(1)
				if tt.refuse {
					return dockerx.ErrSubnetTaken
				}
				return nil
			}
			s := newTestSession(f, planFor(t, tt.pool))
			s.HostPrefixes = func() ([]netip.Prefix, error) { return tt.host, nil }
			err := s.CreateNetworks(context.Background())
			if !errors.Is(err, ErrSubnetPoolExhausted) {
				t.Fatalf("got %v, want ErrSubnetPoolExhausted", err)
			}
			if len(s.Networks) != tt.created {
				t.Errorf("created %d networks, want %d", len(s.Networks), tt.created)
			}
			// The run's networks are created together and share the
			// budget: the one asking when it runs out stops there, the
			// other after the refusal it was waiting for.
			if n := int(calls.Load()); tt.refuse && (n < maxRefusals || n > maxRefusals+1) {
				t.Errorf("the engine was asked %d times, want %d or %d", n, maxRefusals, maxRefusals+1)
			}
		})
	}
}

// TestCreateNetworksConcurrently: 64 runs started at once against an engine
// that refuses overlaps (and whose listing is always stale) all get their
// two networks, none overlapping another.
func TestCreateNetworksConcurrently(t *testing.T) {
	f := newFake()
	var mu sync.Mutex
	var used []netip.Prefix
	f.NetworkErr = func(n dockerx.NetworkSpec) error {
		mu.Lock()
		defer mu.Unlock()
		p := netip.MustParsePrefix(n.Subnet)
		for _, u := range used {
			if u.Overlaps(p) {
				return dockerx.ErrSubnetTaken
			}
		}
		used = append(used, p)
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		in := input(t, defaultSpec(t), WorkloadCheck)
		in.SubnetPool = netip.MustParsePrefix("10.213.0.0/22") // 64 /28s: 32 runs' worth, then refusals
		in.Token = fmt.Sprintf("%06x", i)
		if i >= 32 {
			in.SubnetPool = netip.MustParsePrefix("10.213.4.0/22")
		}
		p, err := NewPlan(in)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- newTestSession(f, p).CreateNetworks(context.Background())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(used) != 128 {
		t.Errorf("%d networks created, want 128", len(used))
	}
}

func TestParseRoutes(t *testing.T) {
	const table = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010200C0	0003	0	0	0	00000000	0	0	0
docker0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
tun0	0000000A	0100000A	0003	0	0	0	000000FF	0	0	0
`
	got, err := parseRoutes(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := prefixes("172.17.0.0/16", "192.0.2.0/24", "10.0.0.0/8")
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	if _, err := parseRoutes(strings.NewReader("Iface Destination\neth0 zz 0 0 0 0 0 ffffffff\n")); err == nil {
		t.Error("a malformed line was accepted")
	}
}

// TestHostPrefixes: this host's own interfaces are among what no run may
// take.
func TestHostPrefixes(t *testing.T) {
	got, err := HostPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if p.Addr().IsLoopback() {
			return
		}
	}
	t.Errorf("got %v, want the loopback network among them", got)
}
