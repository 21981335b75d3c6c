//go:build linux

package roles

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
)

// The Docker backend's hidden helper commands: how the host acts inside a
// run through the engine's API alone (issue 29), with no setns and no
// /proc of this host. hold-release runs in the output holder (an exec);
// net-drop-default-route is a short-lived container that shares only a
// role's network namespace. They are in the table (table.go).

// holdReleaseCmd creates a held role's release file in its output
// volume, as the role's user, locked down to that one directory first.
func holdReleaseCmd(_ context.Context, args []string, s Streams) error {
	var file, token string
	f := newFlags(hold.ReleaseCommand+" --file PATH --token TOKEN", "Create a held role's release file (the Docker backend's release through the output holder)", s)
	f.StringVar(&file, "file", "", "the release file to create")
	f.StringVar(&token, "token", "", "the run's release token, written into the file")
	if err := f.noArgs(args); err != nil {
		return err
	}
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
}

// copySelfCmd copies this binary into the launcher volume (an exec in
// the output holder) and prints the SHA-256 of the copy for the host.
func copySelfCmd(_ context.Context, args []string, s Streams) error {
	var to string
	f := newFlags(inside.CopySelfCommand+" --to PATH", "Copy this binary into the launcher volume (the Docker backend's launcher for a user's workload)", s)
	f.StringVar(&to, "to", "", "the file to create")
	if err := f.noArgs(args); err != nil {
		return err
	}
	sum, err := inside.CopySelf(to)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Out, sum)
	return nil
}

// dropRouteCmd removes every default route of the network namespace
// it runs in, and checks none is left: run by the host as a container
// that joins a role's network namespace (container:<id>) with
// CAP_NET_ADMIN alone, on an engine older than 26, which gives a
// container on an internal network a default route.
func dropRouteCmd(_ context.Context, args []string, s Streams) error {
	f := newFlags(inside.DropRouteCommand, "Remove the default routes of this network namespace (the Docker backend's route fix on old engines)", s)
	if err := f.noArgs(args); err != nil {
		return err
	}
	if err := inside.DropDefaultRoutes(); err != nil {
		return fmt.Errorf("%s: %w", inside.DropRouteCommand, err)
	}
	fmt.Fprintln(s.Err, inside.DropRouteCommand+": no default route left")
	return nil
}

// observeCmd prints, as JSON, the kernel's account of the role's main
// process in the pid namespace it shares (inside.ObserveRole): the
// host's outside view of a role's hardening, through a helper container.
func observeCmd(_ context.Context, args []string, s Streams) error {
	var timeout time.Duration
	f := newFlags(inside.ObserveCommand, "Print the status of the role process in this pid namespace (the Docker backend's outside observation)", s)
	f.DurationVar(&timeout, "timeout", 20*time.Second, "how long to wait for the role's hardening")
	if err := f.noArgs(args); err != nil {
		return err
	}
	st, err := inside.ObserveRole(timeout)
	if err != nil {
		return fmt.Errorf("%s: %w", inside.ObserveCommand, err)
	}
	return json.NewEncoder(s.Out).Encode(st)
}

// awaitReadyCmd waits until the role whose network namespace it
// shares answers on its own loopback (inside.AwaitReady): the host's
// readiness check through a helper container.
func awaitReadyCmd(ctx context.Context, args []string, s Streams) error {
	var port int
	var path string
	var tcp bool
	var timeout time.Duration
	f := newFlags(inside.ReadyCommand+" --port N (--path /P | --tcp)", "Wait until this network namespace's loopback answers (the Docker backend's readiness through a helper)", s)
	f.IntVar(&port, "port", 0, "the loopback port")
	f.StringVar(&path, "path", "", "the HTTP path that must answer 200")
	f.BoolVar(&tcp, "tcp", false, "a TCP connection accepted is enough")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait")
	if err := f.noArgs(args); err != nil {
		return err
	}
	if port <= 0 || port > 65535 || (!tcp && !strings.HasPrefix(path, "/")) {
		return usageErrorf("%s: a --port and a --path starting with / (or --tcp) are required", inside.ReadyCommand)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := inside.AwaitReady(ctx, port, path, tcp); err != nil {
		return fmt.Errorf("%s: %w", inside.ReadyCommand, err)
	}
	fmt.Fprintln(s.Out, inside.Ready)
	return nil
}

// probeGatewayCmd prints whether a host holds an internal network's
// gateway address, from a helper attached to that network
// (inside.ProbeGateway).
func probeGatewayCmd(ctx context.Context, args []string, s Streams) error {
	var addr string
	f := newFlags(inside.ProbeGatewayCommand+" --addr IP:PORT", "Tell whether a host holds this network's gateway address (the Docker backend's bridge check through a helper)", s)
	f.StringVar(&addr, "addr", "", "the gateway address and a port")
	if err := f.noArgs(args); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usageErrorf("%s: --addr IP:PORT: %v", inside.ProbeGatewayCommand, err)
	}
	got, err := inside.ProbeGateway(ctx, addr)
	if err != nil {
		return fmt.Errorf("%s: %w", inside.ProbeGatewayCommand, err)
	}
	fmt.Fprintln(s.Out, got)
	return nil
}
