package cli

import (
	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// workloadFlags are run's and test-sandbox's --image and --pull, and run's
// command after "--": a user's workload instead of our agent (issue 16).
type workloadFlags struct {
	image   string
	pull    string
	command []string
}

func addWorkloadFlags(cmd *cobra.Command, w *workloadFlags) {
	f := cmd.Flags()
	f.StringVar(&w.image, "image", "", "run this image's workload in the sandbox instead of the built-in agent (overrides the spec's [workload] image); its command follows -- (default: the spec's command for the spec's image, else the image's own entrypoint and command)")
	f.StringVar(&w.pull, "pull", sandbox.PullMissing, "pull the workload image: "+sandbox.PullMissing+" (when the engine lacks it) or "+sandbox.PullNever)
}

// setCommand takes the workload's command from the arguments after "--".
func (w *workloadFlags) setCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.ArgsLenAtDash() != 0 {
		return usageErrorf("unexpected argument %q: the workload's command goes after --, e.g. run --image python:3.12-slim -- python3 /app/agent.py", args[0])
	}
	w.command = args
	return nil
}

func (w workloadFlags) validate() error {
	if w.pull != "" && w.pull != sandbox.PullMissing && w.pull != sandbox.PullNever {
		return usageErrorf("--pull %q: want %s or %s", w.pull, sandbox.PullMissing, sandbox.PullNever)
	}
	if w.image != "" {
		if err := spec.CheckImageRef(w.image); err != nil {
			return usageErrorf("--image: %v", err)
		}
	}
	if len(w.command) > 0 {
		if err := spec.CheckCommand(w.command); err != nil {
			return usageErrorf("workload command after --: %v", err)
		}
	}
	return nil
}

func (w workloadFlags) options() *sandbox.OwnWorkload {
	return &sandbox.OwnWorkload{Image: w.image, Command: w.command, Pull: w.pull}
}
