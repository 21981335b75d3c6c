//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/kube"
)

// newKubeLayerCmd is the hidden command of the pods with which
// test-sandbox measures a cluster's isolation layers (kube.CheckLayers):
// "listen" accepts and closes connections until SIGTERM, "dial" makes one
// TCP connection and prints the result as one JSON line. Neither sends a
// byte: a connection is only opened and closed.
func newKubeLayerCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:    kube.LayerCommand,
		Short:  "Listen or dial once inside the run's namespace (test-sandbox's isolation-layer pods on Kubernetes)",
		Hidden: true,
	}
	var port int
	listen := &cobra.Command{
		Use:  "listen --port PORT",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 1 || port > 65535 {
				return usageErrorf("--port %d: want 1 to 65535", port)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return layerListen(ctx, port)
		},
	}
	listen.Flags().IntVar(&port, "port", 0, "TCP port")
	var timeout time.Duration
	dial := &cobra.Command{
		Use:  "dial HOST:PORT [--timeout D]",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, p, err := net.SplitHostPort(args[0]); err != nil {
				return usageErrorf("dial %q: want HOST:PORT", args[0])
			} else if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return usageErrorf("dial %q: port %q", args[0], p)
			}
			if timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration", timeout)
			}
			return json.NewEncoder(s.Out).Encode(layerDial(cmd.Context(), args[0], timeout))
		},
	}
	dial.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long the connection may take")
	cmd.AddCommand(listen, dial)
	return cmd
}

func layerListen(ctx context.Context, port int) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accepting: %w", err)
		}
		c.Close()
	}
}

func layerDial(ctx context.Context, addr string, timeout time.Duration) kube.DialResult {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return kube.DialResult{Address: addr, Error: err.Error()}
	}
	c.Close()
	return kube.DialResult{Address: addr, Connected: true}
}
