//go:build testcommands

package cli

import "github.com/spf13/cobra"

// The harness's own tests need commands and flags no user should see:
// they are built only with `-tags testcommands` (bin/mcpsidecar-test,
// which `make e2e` builds); the product binary (`make build`) has none of
// them, in its command tree or its help (testcommands_product.go).

// testCommands are the test binary's hidden commands. Their output is a
// product collected by the host, like the roles'.
func testCommands() commandSet {
	return commandSet{
		builds:   []func(Streams) *cobra.Command{newSleepCmd, newHardenSelftestCmd, newGetCmd, newOTLPCmd},
		products: []string{"x-sleep", "harden-selftest", "x-get", "x-otlp"},
	}
}

// addTestFlags adds run's, doctor's and test-sandbox's hidden flags.
func addTestFlags(cmd *cobra.Command, o *sandboxOptions) {
	f := cmd.Flags()
	f.StringSliceVar(&o.workloadCmd, "x-workload-cmd", nil, "replace the workload container's command (testing)")
	f.StringSliceVar(&o.gatewayCmd, "x-gateway-cmd", nil, "replace the gateway container's command (testing)")
	_ = f.MarkHidden("x-workload-cmd")
	_ = f.MarkHidden("x-gateway-cmd")
}
