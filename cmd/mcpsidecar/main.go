// Command mcpsidecar is the single binary behind every role of the sandbox:
// the host CLI (run, doctor, test-sandbox, spec, runs, gc, report) and the
// in-container roles (sidecar, gateway, agent, probe). See internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpsidecar/mcpsidecar/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
