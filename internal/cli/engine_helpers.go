package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
)

// The Docker backend's hidden helper commands: how the host acts inside a
// run through the engine's API alone (issue 29), with no setns and no
// /proc of this host. hold-release runs in the output holder (an exec);
// net-drop-default-route is a short-lived container that shares only a
// role's network namespace.
func init() {
	subcommands = append(subcommands, newHoldReleaseCmd, newDropRouteCmd, newObserveCmd)
	inContainer[dockerx.ObserveCommand] = true // its stdout is JSON for the host
}

// newHoldReleaseCmd creates a held role's release file in its output
// volume, as the role's user, locked down to that one directory first.
func newHoldReleaseCmd(s Streams) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:    hold.ReleaseCommand + " --file PATH",
		Short:  "Create a held role's release file (the Docker backend's release through the output holder)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if !filepath.IsAbs(file) || filepath.Base(file) != hold.File {
				return usageErrorf("%s: --file must be an absolute path to a %s file", hold.ReleaseCommand, hold.File)
			}
			p := podHardening(hold.ReleaseCommand)
			p.Landlock.ReadWriteDirs = []string{filepath.Dir(file)}
			if err := lockDown(p, s.Err); err != nil {
				return err
			}
			if err := hold.CreateReleaseFile(file); err != nil {
				return fmt.Errorf("%s: %w", hold.ReleaseCommand, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the release file to create")
	return cmd
}

// newDropRouteCmd removes every default route of the network namespace
// it runs in, and checks none is left: run by the host as a container
// that joins a role's network namespace (container:<id>) with
// CAP_NET_ADMIN alone, on an engine older than 26, which gives a
// container on an internal network a default route.
func newDropRouteCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:    dockerx.DropRouteCommand,
		Short:  "Remove the default routes of this network namespace (the Docker backend's route fix on old engines)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := dockerx.DropDefaultRoutesHere(); err != nil {
				return fmt.Errorf("%s: %w", dockerx.DropRouteCommand, err)
			}
			fmt.Fprintln(s.Err, dockerx.DropRouteCommand+": no default route left")
			return nil
		},
	}
}

// newObserveCmd prints, as JSON, the kernel's account of the role's main
// process in the pid namespace it shares (dockerx.ObserveRoleHere): the
// host's outside view of a role's hardening, through a helper container.
func newObserveCmd(s Streams) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:    dockerx.ObserveCommand,
		Short:  "Print the status of the role process in this pid namespace (the Docker backend's outside observation)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			st, err := dockerx.ObserveRoleHere(timeout, func() { fmt.Fprintln(s.Err, dockerx.ObserveWatching) })
			if err != nil {
				return fmt.Errorf("%s: %w", dockerx.ObserveCommand, err)
			}
			return json.NewEncoder(s.Out).Encode(st)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 20*time.Second, "how long to wait for the role's hardening")
	return cmd
}
