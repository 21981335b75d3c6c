//go:build linux

package netguard

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// render writes the rule program one rule per line: chain, then each
// expression with its fields.
func render(rs Ruleset) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "table %v %s\n", rs.Table.Family, rs.Table.Name)
	for _, ch := range rs.Chains {
		fmt.Fprintf(&b, "chain %s hook %d priority %d type %s policy %d\n", ch.Name, *ch.Hooknum, *ch.Priority, ch.Type, *ch.Policy)
	}
	for _, r := range rs.Rules {
		fmt.Fprintf(&b, "rule %s:", r.Chain.Name)
		for _, e := range r.Exprs {
			fmt.Fprintf(&b, " %T%+v", e, e)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

func TestProgramGolden(t *testing.T) {
	tests := []struct {
		name  string
		allow []string
	}{
		{"none", nil},
		{"sidecar-gateway", []string{"10.96.0.10:8000", "10.96.0.11:3128", "10.96.0.11:3129"}},
		{"ipv6", []string{"[fd00::10]:8000", "10.96.0.11:3128"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, filepath.Join("testdata", "rules-"+tt.name+".txt"), render(Program(c)))
		})
	}
}

// TestProgramShape: both chains drop by policy, and each allowed
// destination has exactly one accept rule (a dropped rule or policy
// would fail here even under -update).
func TestProgramShape(t *testing.T) {
	c, err := Parse([]string{"10.96.0.10:8000", "[fd00::1]:3128"})
	if err != nil {
		t.Fatal(err)
	}
	rs := Program(c)
	if len(rs.Chains) != 2 {
		t.Fatalf("got %d chains, want output and input", len(rs.Chains))
	}
	for _, ch := range rs.Chains {
		if ch.Policy == nil || *ch.Policy != 0 { // NF_DROP
			t.Errorf("chain %s policy = %v, want drop", ch.Name, ch.Policy)
		}
	}
	if got, want := len(rs.Rules), 2+2+2; got != want {
		t.Errorf("got %d rules, want %d (lo+established each way, one per destination)", got, want)
	}
}

func TestArgsRoundTrip(t *testing.T) {
	in := Config{Allow: []Dest{netip.MustParseAddrPort("10.96.0.10:8000"), netip.MustParseAddrPort("[fd00::1]:3128")}}
	args := Args(in)
	if args[0] != Role {
		t.Fatalf("args[0] = %q, want %q", args[0], Role)
	}
	var vals []string
	for i := 1; i < len(args); i += 2 {
		if args[i] != "--"+FlagAllow {
			t.Fatalf("args[%d] = %q", i, args[i])
		}
		vals = append(vals, args[i+1])
	}
	got, err := Parse(vals)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in.Allow, got.Allow, cmp.Comparer(func(a, b Dest) bool { return a == b })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"mcp-sidecar:8000", "want ADDR:PORT"},
		{"10.0.0.1", "want ADDR:PORT"},
		{"10.0.0.1:0", "port 0"},
		{"0.0.0.0:80", "one concrete address"},
		{"[::]:80", "one concrete address"},
		{"[fe80::1%eth0]:80", "one concrete address"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse([]string{tt.in})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) = %v, want error containing %q", tt.in, err, tt.want)
			}
		})
	}
	c, err := Parse([]string{"[::ffff:10.0.0.1]:80", "10.0.0.1:80"})
	if err != nil || !slices.Equal(c.Allow, []Dest{netip.MustParseAddrPort("10.0.0.1:80")}) {
		t.Errorf("mapped and plain IPv4 not merged: %v, %v", c.Allow, err)
	}
}
