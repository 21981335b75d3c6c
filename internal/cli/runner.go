package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// sandboxCommand is what run, doctor and test-sandbox differ in. Each of
// them is one of these, built by newSandboxCmd and run by runSandboxCmd:
// the same flags, checks, backend choice and lifecycle (runSandbox).
type sandboxCommand struct {
	name        string               // "run", "doctor", "test-sandbox"
	workload    orchestrate.Workload // what the agent-role container runs
	short, long string               // the help
	args        cobra.PositionalArgs
	timeout     time.Duration // --timeout's default
	// progress prints a line per model turn and tool call during the run
	// (--events streams every event; progress.go).
	progress bool
	// ledger prints the spec's softening ledger before the run
	// (spec_gate.go).
	ledger bool
	// ownWorkload adds --image and --pull: a user's workload
	// (run_workload.go).
	ownWorkload bool
	// flags adds the command's own flags.
	flags func(cmd *cobra.Command, o *sandboxOptions)
	// before runs once the flags are checked and the backend chosen, just
	// before the lifecycle; an error ends the command.
	before func(s Streams, o *sandboxOptions) error
	// after runs once the lifecycle returned, whatever it returned.
	after func(ctx context.Context, s Streams, o sandboxOptions, res sandbox.Result)
}

// newSandboxCmd builds the command c describes.
func newSandboxCmd(s Streams, c sandboxCommand) *cobra.Command {
	o := &sandboxOptions{command: c.name, workload: c.workload, progress: c.progress, ledger: c.ledger}
	b := &backendFlags{}
	cmd := &cobra.Command{
		Use: c.name, Short: c.short, Long: c.long, Args: c.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSandboxCmd(cmd, args, s, c, *o, *b)
		},
	}
	o.addFlags(cmd, c.timeout)
	b.add(cmd) // backend.go
	if c.ownWorkload {
		addWorkloadFlags(cmd, &o.own) // run_workload.go
	}
	if c.flags != nil {
		c.flags(cmd, o)
	}
	return cmd
}

// runSandboxCmd is the one runner of run, doctor and test-sandbox: it
// takes the workload's command after --, checks the flags, chooses the
// backend, and runs the command's step before the lifecycle, the
// lifecycle itself (runSandbox: engine, spec gate, sandbox.Run, summary,
// exit 130 after a signal) and the command's step after it.
func runSandboxCmd(cmd *cobra.Command, args []string, s Streams, c sandboxCommand, o sandboxOptions, b backendFlags) error {
	if err := o.own.setCommand(cmd, args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	var err error
	if o.kube, err = b.kube(o); err != nil {
		return err
	}
	o.backendDefaults(cmd)
	if c.before != nil {
		if err := c.before(s, &o); err != nil {
			return err
		}
	}
	res, err := runSandbox(cmd.Context(), s, o)
	if c.after != nil {
		c.after(cmd.Context(), s, o, res)
	}
	return err
}
