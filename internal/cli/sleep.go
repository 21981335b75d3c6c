//go:build testcommands

package cli

import (
	"time"

	"github.com/spf13/cobra"
)

// newSleepCmd is a hidden workload for the harness's own tests: a process
// that outlives its timeout, or is still running when a signal arrives.
// It touches nothing, so it runs under any hardening.
func newSleepCmd(Streams) *cobra.Command {
	return &cobra.Command{
		Use:    "x-sleep DURATION",
		Short:  "Sleep (a workload for the harness's tests)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := time.ParseDuration(args[0])
			if err != nil {
				return usageErrorf("x-sleep: %v", err)
			}
			select {
			case <-time.After(d):
			case <-cmd.Context().Done():
			}
			return nil
		},
	}
}
