package cli

import (
	"fmt"
	"runtime"

	"github.com/mcpsidecar/mcpsidecar/internal/version"
	"github.com/spf13/cobra"
)

func newVersionCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(s.Out, versionLine())
			return err
		},
	}
}

// versionLine is what `version` and `--version` print.
func versionLine() string {
	return fmt.Sprintf("mcpsidecar %s %s/%s %s", version.String(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}
