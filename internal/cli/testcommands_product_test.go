//go:build !testcommands

package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestProductHasNoTestCommands: the product binary (built without
// -tags testcommands) has none of the harness's test-only commands and
// flags, hidden or not, and its help names none of them.
func TestProductHasNoTestCommands(t *testing.T) {
	if found := testOnlyIn(newRootCmd(Streams{})); len(found) > 0 {
		t.Errorf("the product's command tree has test-only entries: %s", strings.Join(found, ", "))
	}
	help := helpTexts(t)
	for _, name := range slices.Concat(testOnlyCommands, testOnlyFlags) {
		if strings.Contains(help, name) {
			t.Errorf("the product's help names %q", name)
		}
	}
}
