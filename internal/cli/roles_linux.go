//go:build linux

package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/roles"
)

// platformCommands are the in-container roles and the hidden helpers the
// backends run in containers and pods (internal/roles). They exist only
// in a Linux build: they run in the sandbox's containers, and
// internal/contract checks that a Windows or macOS host binary imports
// none of their code. The host binary keeps them, each delegating to
// internal/roles, so that it can still go into the image itself (a
// `go install`ed binary, the test binary with its own hidden commands):
// the slim role binary, cmd/mcpsidecar-role, runs the same table.
func platformCommands() commandSet {
	var set commandSet
	for _, c := range roles.Commands() {
		set.builds = append(set.builds, func(s Streams) *cobra.Command { return roleCommand(c, s) })
		if c.Product {
			set.products = append(set.products, c.Name)
		}
	}
	return set
}

// roleCommand is c in the command tree: listed in the roles' group of
// the help, or hidden; its flags are the role's own (internal/roles
// parses them).
func roleCommand(c roles.Command, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:                c.Name,
		Short:              c.Short,
		Hidden:             !c.Listed,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := roles.Run(cmd.Context(), append([]string{c.Name}, args...), roles.Streams(s)); code != ExitOK {
				return roleExit(code)
			}
			return nil
		},
	}
}

// roleExit is a role's exit code, its error already printed by
// internal/roles.
type roleExit int

func (e roleExit) Error() string { return "exit status of a role" }

// runRole runs a role's command line through internal/roles, as the role
// binary does: the same flags, messages and exit codes.
func runRole(ctx context.Context, args []string, s Streams) (int, bool) {
	if len(args) == 0 {
		return 0, false
	}
	if _, ok := roles.Lookup(args[0]); !ok {
		return 0, false
	}
	return roles.Run(ctx, args, roles.Streams(s)), true
}

// reportedExit is the code of an error already printed.
func reportedExit(err error) (int, bool) {
	var e roleExit
	if errors.As(err, &e) {
		return int(e), true
	}
	return 0, false
}
