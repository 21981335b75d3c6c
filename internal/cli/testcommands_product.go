//go:build !testcommands

package cli

import "github.com/spf13/cobra"

// The product binary has none of the test binary's commands and flags
// (testcommands.go).

func testCommands() commandSet { return commandSet{} }

func addTestFlags(*cobra.Command, *sandboxOptions) {}
