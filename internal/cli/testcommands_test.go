package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// testOnly are the commands and flags that exist only for the harness's
// own tests (testcommands.go, built with -tags testcommands).
var (
	testOnlyCommands = []string{"x-sleep", "harden-selftest", "x-get"}
	testOnlyFlags    = []string{"x-workload-cmd", "x-gateway-cmd"}
)

// testOnlyIn lists the test-only commands and flags in root's tree,
// hidden ones included, as "command" or "command --flag".
func testOnlyIn(root *cobra.Command) []string {
	var found []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, name := range testOnlyCommands {
			if c.Name() == name {
				found = append(found, c.CommandPath())
			}
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			for _, name := range testOnlyFlags {
				if f.Name == name {
					found = append(found, c.CommandPath()+" --"+name)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return found
}

// helpTexts is what --help prints for the root and the sandbox commands.
func helpTexts(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"doctor", "--help"}, {"test-sandbox", "--help"}} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != ExitOK {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		all.WriteString(out.String())
		all.WriteString(errb.String())
	}
	return all.String()
}
