// Package cli is the command tree of mcpsidecar: it turns flags into options
// structs, calls the operation that does the work, and maps errors to exit
// codes and one-line hints. It is the only package (besides each role's one
// config function) that reads flags and the environment, and the only one
// that decides exit codes.
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Streams are the process's standard streams; commands write only to these.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// subcommands builds every registered command. Register only commands that
// work; each lives in its own file of this package.
var subcommands = []func(Streams) *cobra.Command{
	newVersionCmd,
	newAgentCmd,
	newSidecarCmd,
	newGatewayCmd,
	newSpecCmd,
	newRunCmd,
	newDoctorCmd,
	newTestSandboxCmd,
	newGCCmd,
	newRunsCmd,
	newSleepCmd,
	newProbeCmd,
	newReportCmd,
}

// newRootCmd builds the command tree.
func newRootCmd(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "mcpsidecar",
		Short: "Run an AI agent in a hardened, disposable Docker sandbox with an MCP sidecar and an egress gateway",
		Long: `mcpsidecar runs an agent workload inside a hardened, disposable Docker sandbox,
beside an MCP server sidecar and an egress gateway, on a private per-run network,
and leaves a complete, auditable record of what happened.

The sandbox is described by sandbox_spec.toml (a default is built in). Start with:

  mcpsidecar spec check            validate the spec (every problem, with file:line)
  mcpsidecar spec resolve --out d  see everything the spec turns into

Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 invalid spec,
4 isolation violation found by the probe suite, 5 environment unavailable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return withCode(ExitUsage, err)
	})
	for _, build := range subcommands {
		root.AddCommand(build(s))
	}
	return root
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, s Streams) int {
	root := newRootCmd(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code, hint := codeOf(err)
	if code == ExitRuntime && isUsage(err) {
		code = ExitUsage
	}
	fmt.Fprintf(s.Err, "mcpsidecar: %v\n", err)
	if hint != "" {
		fmt.Fprintf(s.Err, "hint: %s\n", hint)
	}
	return code
}

// isUsage recognises cobra's own argument errors, which it does not type.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
