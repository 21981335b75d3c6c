//go:build testcommands

package cli

import (
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"
)

// newGetCmd is a hidden workload for the harness's own tests: one HTTP
// GET through the environment's proxy (the gateway, in a sandbox), kept
// in flight until the answer comes or a signal ends it. A test holds the
// answer back to have a gateway request in flight when the run stops.
func newGetCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:    "x-get URL",
		Short:  "GET a URL through $HTTP_PROXY and print the status (a workload for the harness's tests)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, args[0], nil)
			if err != nil {
				return usageErrorf("x-get: %v", err)
			}
			fmt.Fprintf(s.Out, "x-get: GET %s\n", args[0])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("x-get: %w", err)
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			fmt.Fprintf(s.Out, "x-get: %s\n", resp.Status)
			return nil
		},
	}
}
