//go:build linux

package probe

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFibLocal(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("192.168.32.4")}
	if diff := cmp.Diff(want, parseFibLocal([]byte(fibTrie)), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("own addresses mismatch (-want +got):\n%s", diff)
	}
}
