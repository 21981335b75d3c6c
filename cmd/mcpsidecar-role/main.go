//go:build linux

// Command mcpsidecar-role is the slim Linux binary that goes into the
// sandbox's image: it runs only the in-container roles and the backends'
// hidden helpers (internal/roles), with the same command lines, output and
// exit codes as the host binary's, and carries neither the command
// framework nor the Docker or Kubernetes client (internal/contract). In
// the image it is /mcpsidecar, as the host binary was.
package main

import (
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/interrupt"
	"github.com/mcpsidecar/mcpsidecar/internal/roles"
)

func main() {
	// The first signal ends the role gracefully (its record synced).
	ctx, cancel := interrupt.Context("mcpsidecar: second signal, exiting")
	code := roles.Run(ctx, os.Args[1:], roles.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	cancel()
	os.Exit(code)
}
