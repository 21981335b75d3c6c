//go:build testcommands && linux

package cli

import "github.com/spf13/cobra"

// The gateway role's test flag (the gateway exists only in a Linux build).
func init() {
	// A decision log that fills in a few requests (the e2e test of the
	// gateway's refuse-all state, docs/egress.md).
	addGatewayTestFlags = func(cmd *cobra.Command, o *gatewayOptions) {
		cmd.Flags().Int64Var(&o.logBudget, "x-log-budget", 0, "lower the decision log's byte budget (testing)")
		_ = cmd.Flags().MarkHidden("x-log-budget")
	}
}
