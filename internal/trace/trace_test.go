package trace

import (
	"strings"
	"testing"
)

// The cases of the two parsers this package replaces (internal/egress and
// internal/sidecar), under the one rule: upper case is now refused on both.
func TestID(t *testing.T) {
	const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	const id = "0af7651916cd43dd8448eb211c80319c"
	for _, tc := range []struct{ name, in, want string }{
		{"valid", valid, id},
		{"spaces, unsampled", " 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00 ", id},
		{"empty", "", ""},
		{"upper case", strings.ToUpper(valid), ""},
		{"upper-case trace-id", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", ""},
		{"all-zero trace-id", "00-00000000000000000000000000000000-b7ad6b7169203331-01", ""},
		{"all-zero parent-id", "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", ""},
		{"version ff", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", ""},
		{"short id", "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01", ""},
		{"not hex", "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01", ""},
		{"short parent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71-01", ""},
		{"missing flags", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", ""},
		{"bad flags", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-zz", ""},
		{"injection", "00-0af7651916cd43dd8448eb211c80319c\r\nX-Evil: 1-b7ad6b7169203331-01", ""},
	} {
		if got := ID(tc.in); got != tc.want {
			t.Errorf("%s: ID(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
	if FirstID(nil) != "" || FirstID([]string{valid, "00-11111111111111111111111111111111-b7ad6b7169203331-01"}) != id {
		t.Error("FirstID: the first value wins")
	}
	for range 100 {
		n := NewID()
		if got := ID(Parent(n)); got != n {
			t.Fatalf("Parent(%s) = %q does not round-trip", n, Parent(n))
		}
	}
}
