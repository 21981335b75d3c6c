//go:build linux && !testcommands

package roles

import (
	"strings"
	"testing"
)

// TestNoTestFlagInProduct: the gateway's test-only flag exists only in
// the test binary (testflags.go).
func TestNoTestFlagInProduct(t *testing.T) {
	code, _, stderr := run(t, "gateway", "--x-log-budget", "10")
	if code != exitUsage || !strings.Contains(stderr, "gateway: unknown flag: --x-log-budget") {
		t.Errorf("exit %d, stderr %q; want %d and the unknown flag named", code, stderr, exitUsage)
	}
}
