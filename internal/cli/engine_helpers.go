//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
)

// The Docker backend's hidden helper commands: how the host acts inside a
// run through the engine's API alone (issue 29), with no setns and no
// /proc of this host. hold-release runs in the output holder (an exec);
// net-drop-default-route is a short-lived container that shares only a
// role's network namespace. They are listed in platformCommands
// (roles_linux.go).

// newHoldReleaseCmd creates a held role's release file in its output
// volume, as the role's user, locked down to that one directory first.
func newHoldReleaseCmd(s Streams) *cobra.Command {
	var file, token string
	cmd := &cobra.Command{
		Use:    hold.ReleaseCommand + " --file PATH --token TOKEN",
		Short:  "Create a held role's release file (the Docker backend's release through the output holder)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if !filepath.IsAbs(file) || filepath.Base(file) != hold.File {
				return usageErrorf("%s: --file must be an absolute path to a %s file", hold.ReleaseCommand, hold.File)
			}
			if token == "" {
				return usageErrorf("%s: --token is required (the run's release token)", hold.ReleaseCommand)
			}
			p := podHardening(hold.ReleaseCommand)
			p.Landlock.ReadWriteDirs = []string{filepath.Dir(file)}
			if err := lockDown(p, s.Err); err != nil {
				return err
			}
			if err := hold.CreateReleaseFile(file, token); err != nil {
				return fmt.Errorf("%s: %w", hold.ReleaseCommand, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the release file to create")
	cmd.Flags().StringVar(&token, "token", "", "the run's release token, written into the file")
	return cmd
}

// newCopySelfCmd copies this binary into the launcher volume (an exec in
// the output holder) and prints the SHA-256 of the copy for the host.
func newCopySelfCmd(s Streams) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:    inside.CopySelfCommand + " --to PATH",
		Short:  "Copy this binary into the launcher volume (the Docker backend's launcher for a user's workload)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			sum, err := inside.CopySelf(to)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.Out, sum)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the file to create")
	return cmd
}

// newDropRouteCmd removes every default route of the network namespace
// it runs in, and checks none is left: run by the host as a container
// that joins a role's network namespace (container:<id>) with
// CAP_NET_ADMIN alone, on an engine older than 26, which gives a
// container on an internal network a default route.
func newDropRouteCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:    inside.DropRouteCommand,
		Short:  "Remove the default routes of this network namespace (the Docker backend's route fix on old engines)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := inside.DropDefaultRoutes(); err != nil {
				return fmt.Errorf("%s: %w", inside.DropRouteCommand, err)
			}
			fmt.Fprintln(s.Err, inside.DropRouteCommand+": no default route left")
			return nil
		},
	}
}

// newObserveCmd prints, as JSON, the kernel's account of the role's main
// process in the pid namespace it shares (inside.ObserveRole): the
// host's outside view of a role's hardening, through a helper container.
func newObserveCmd(s Streams) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:    inside.ObserveCommand,
		Short:  "Print the status of the role process in this pid namespace (the Docker backend's outside observation)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			st, err := inside.ObserveRole(timeout)
			if err != nil {
				return fmt.Errorf("%s: %w", inside.ObserveCommand, err)
			}
			return json.NewEncoder(s.Out).Encode(st)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 20*time.Second, "how long to wait for the role's hardening")
	return cmd
}

// newAwaitReadyCmd waits until the role whose network namespace it
// shares answers on its own loopback (inside.AwaitReady): the host's
// readiness check through a helper container.
func newAwaitReadyCmd(s Streams) *cobra.Command {
	var port int
	var path string
	var tcp bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:    inside.ReadyCommand + " --port N (--path /P | --tcp)",
		Short:  "Wait until this network namespace's loopback answers (the Docker backend's readiness through a helper)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port <= 0 || port > 65535 || (!tcp && !strings.HasPrefix(path, "/")) {
				return usageErrorf("%s: a --port and a --path starting with / (or --tcp) are required", inside.ReadyCommand)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := inside.AwaitReady(ctx, port, path, tcp); err != nil {
				return fmt.Errorf("%s: %w", inside.ReadyCommand, err)
			}
			fmt.Fprintln(s.Out, inside.Ready)
			return nil
		},
	}
	cmd.Flags().IntVar(&port, "port", 0, "the loopback port")
	cmd.Flags().StringVar(&path, "path", "", "the HTTP path that must answer 200")
	cmd.Flags().BoolVar(&tcp, "tcp", false, "a TCP connection accepted is enough")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait")
	return cmd
}

// newProbeGatewayCmd prints whether a host holds an internal network's
// gateway address, from a helper attached to that network
// (inside.ProbeGateway).
func newProbeGatewayCmd(s Streams) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:    inside.ProbeGatewayCommand + " --addr IP:PORT",
		Short:  "Tell whether a host holds this network's gateway address (the Docker backend's bridge check through a helper)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return usageErrorf("%s: --addr IP:PORT: %v", inside.ProbeGatewayCommand, err)
			}
			got, err := inside.ProbeGateway(cmd.Context(), addr)
			if err != nil {
				return fmt.Errorf("%s: %w", inside.ProbeGatewayCommand, err)
			}
			fmt.Fprintln(s.Out, got)
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "the gateway address and a port")
	return cmd
}
