//go:build linux

package cli

// The in-container roles exist only in a Linux build: they run in the
// sandbox's containers, and internal/contract checks that a Windows or
// macOS host binary imports none of their code.
func init() {
	subcommands = append(subcommands, newAgentCmd, newSidecarCmd, newGatewayCmd, newProbeCmd)
}
