//go:build testcommands

package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestTestBinaryHasTestCommands: the test binary (-tags testcommands)
// has every test-only command and flag the e2e tests use, hidden from
// its help.
func TestTestBinaryHasTestCommands(t *testing.T) {
	found := strings.Join(testOnlyIn(newRootCmd(Streams{})), "\n")
	for _, want := range []string{"mcpsidecar x-sleep", "mcpsidecar harden-selftest", "mcpsidecar x-get", "mcpsidecar doctor --x-workload-cmd",
		"mcpsidecar run --x-gateway-cmd", "mcpsidecar test-sandbox --x-workload-cmd"} {
		if !strings.Contains(found, want) {
			t.Errorf("the test binary lacks %q; it has:\n%s", want, found)
		}
	}
	help := helpTexts(t)
	for _, name := range slices.Concat(testOnlyCommands, testOnlyFlags) {
		if strings.Contains(help, name) {
			t.Errorf("the test binary's help names %q (they are hidden)", name)
		}
	}
}
