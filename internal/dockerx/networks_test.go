package dockerx

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/network"
)

func TestClassifyNetworkError(t *testing.T) {
	tests := []struct {
		msg  string
		want error
	}{
		{"Error response from daemon: Pool overlaps with other one on this address space", ErrSubnetTaken},
		{"invalid pool request: Pool overlaps with other one on this address space", ErrSubnetTaken},
		{"cannot create network abc (br-abc): conflicts with network def (br-def): networks have overlapping IPv4", ErrSubnetTaken},
		{"Error response from daemon: could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network", ErrNoAddressPool},
		{"all predefined address pools have been fully subnetted", ErrNoAddressPool},
		{"network with name x already exists", nil},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			err := classifyNetworkError(errors.New(tt.msg))
			for _, kind := range []error{ErrSubnetTaken, ErrNoAddressPool} {
				if got := errors.Is(err, kind); got != (kind == tt.want) {
					t.Errorf("errors.Is(%v) = %v, want %v", kind, got, kind == tt.want)
				}
			}
			if err.Error() != tt.msg {
				t.Errorf("message %q, want the engine's %q", err.Error(), tt.msg)
			}
		})
	}
}

func TestNetworkIPAM(t *testing.T) {
	got, err := networkIPAM(NetworkSpec{Name: "n", Subnet: "10.213.4.16/28", Gateway: "10.213.4.17"})
	if err != nil {
		t.Fatal(err)
	}
	want := &network.IPAM{Driver: "default", Config: []network.IPAMConfig{
		{Subnet: netip.MustParsePrefix("10.213.4.16/28"), Gateway: netip.MustParseAddr("10.213.4.17")},
	}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("ipam mismatch (-want +got):\n%s", diff)
	}
	if got, err := networkIPAM(NetworkSpec{Name: "n"}); got != nil || err != nil {
		t.Errorf("no subnet: got %v, %v, want the engine's default pools (nil)", got, err)
	}
	if _, err := networkIPAM(NetworkSpec{Name: "n", Subnet: "10.213.4.16"}); err == nil {
		t.Error("a subnet without a prefix length was accepted")
	}
}
