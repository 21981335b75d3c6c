package cli

import (
	"fmt"
	"runtime"

	"github.com/mcpsidecar/mcpsidecar/internal/version"
	"github.com/spf13/cobra"
)

func newVersionCmd(s Streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return writeJSONDoc(s.Out, versionSchema, versionDoc{version.String(), runtime.GOOS, runtime.GOARCH, runtime.Version()})
			}
			_, err := fmt.Fprintln(s.Out, versionLine())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// versionLine is what `version` and `--version` print.
func versionLine() string {
	return fmt.Sprintf("mcpsidecar %s %s/%s %s", version.String(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// versionDoc is `version --json`.
type versionDoc struct {
	Version string `json:"version"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Go      string `json:"go"`
}
