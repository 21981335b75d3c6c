//go:build linux

// Command mcpsidecar-role is the slim Linux binary that goes into the
// sandbox's image: it runs only the in-container roles and the backends'
// hidden helpers (internal/roles), with the same command lines, output and
// exit codes as the host binary's, and carries neither the command
// framework nor the Docker or Kubernetes client (internal/contract). In
// the image it is /mcpsidecar, as the host binary was.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpsidecar/mcpsidecar/internal/roles"
)

// exitForced is the status of a second, forcing signal (128+SIGINT).
const exitForced = 130

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal ends the role gracefully (its record synced);
		// a second one forces the exit, as in the host binary.
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "mcpsidecar: second signal, exiting")
		os.Exit(exitForced)
	}()
	code := roles.Run(ctx, os.Args[1:], roles.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	cancel()
	os.Exit(code)
}
