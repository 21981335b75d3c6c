//go:build linux

package roles

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

	"github.com/mcpsidecar/mcpsidecar/internal/kube/layercheck"
)

// kubeLayerCmd is the hidden command of the pods with which
// test-sandbox measures a cluster's isolation layers (kube.CheckLayers):
// "listen" accepts and closes connections until SIGTERM, "dial" makes one
// TCP connection and prints the result as one JSON line. Neither sends a
// byte: a connection is only opened and closed.
func kubeLayerCmd(ctx context.Context, args []string, s Streams) error {
	const long = "Listen or dial once inside the run's namespace (test-sandbox's isolation-layer pods on Kubernetes)"
	if len(args) == 0 {
		newFlags(layercheck.Command+" (listen --port PORT | dial HOST:PORT [--timeout D])", long, s).help()
		return nil
	}
	switch args[0] {
	case "listen":
		return layerListenCmd(ctx, args[1:], s)
	case "dial":
		return layerDialCmd(ctx, args[1:], s)
	case "-h", "--help", "-help":
		newFlags(layercheck.Command+" (listen --port PORT | dial HOST:PORT [--timeout D])", long, s).help()
		return nil
	}
	return usageErrorf("unknown command %q for %q", args[0], "mcpsidecar "+layercheck.Command)
}

func layerListenCmd(ctx context.Context, args []string, s Streams) error {
	var port int
	f := newFlags(layercheck.Command+" listen --port PORT", "", s)
	f.IntVar(&port, "port", 0, "TCP port")
	if err := f.noArgs(args); err != nil {
		return err
	}
	if port < 1 || port > 65535 {
		return usageErrorf("--port %d: want 1 to 65535", port)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return layerListen(ctx, port)
}

func layerDialCmd(ctx context.Context, args []string, s Streams) error {
	var timeout time.Duration
	f := newFlags(layercheck.Command+" dial HOST:PORT [--timeout D]", "", s)
	f.DurationVar(&timeout, "timeout", 3*time.Second, "how long the connection may take")
	rest, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("accepts 1 arg(s), received %d", len(rest))
	}
	if _, p, err := net.SplitHostPort(rest[0]); err != nil {
		return usageErrorf("dial %q: want HOST:PORT", rest[0])
	} else if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return usageErrorf("dial %q: port %q", rest[0], p)
	}
	if timeout <= 0 {
		return usageErrorf("--timeout %s: want a positive duration", timeout)
	}
	return json.NewEncoder(s.Out).Encode(layerDial(ctx, rest[0], timeout))
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

func layerDial(ctx context.Context, addr string, timeout time.Duration) layercheck.DialResult {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return layercheck.DialResult{Address: addr, Error: err.Error()}
	}
	c.Close()
	return layercheck.DialResult{Address: addr, Connected: true}
}
