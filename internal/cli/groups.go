package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// rejectUnknownSubcommands makes every command that has subcommands treat
// an argument naming none of them as a usage error (exit 2), as the root
// does: cobra runs a group without a Run by printing its help and exiting
// 0, so a mistyped `mcpsidecar spec chek` in a script would pass. A group
// without a Run of its own still prints its help when given nothing.
func rejectUnknownSubcommands(c *cobra.Command) {
	if c.HasSubCommands() {
		if c.Args == nil {
			c.Args = noSubcommandNamed
		}
		if !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	for _, sub := range c.Commands() {
		rejectUnknownSubcommands(sub)
	}
}

// noSubcommandNamed is the Args of a group: any argument is a subcommand
// it does not have.
func noSubcommandNamed(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default for the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageErrorf("%s", msg)
}
