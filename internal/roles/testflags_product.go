//go:build linux && !testcommands

package roles

// addGatewayTestFlags: the product's gateway has no test-only flag
// (testflags.go).
func addGatewayTestFlags(*flags, *int64) {}
