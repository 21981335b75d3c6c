//go:build linux && testcommands

package roles

// addGatewayTestFlags adds the gateway role's test-only flag, in the test
// binary alone (`-tags testcommands`, bin/mcpsidecar-test): a decision log
// that fills in a few requests (the e2e test of the gateway's refuse-all
// state, docs/egress.md).
func addGatewayTestFlags(f *flags, logBudget *int64) {
	f.Int64Var(logBudget, "x-log-budget", 0, "lower the decision log's byte budget (testing)")
}
