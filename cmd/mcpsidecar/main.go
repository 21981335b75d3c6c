// Command mcpsidecar is the single binary behind every role of the sandbox:
// the host CLI (run, doctor, test-sandbox, spec, runs, gc, report) and the
// in-container roles (sidecar, gateway, agent, probe). See internal/cli.
package main

import (
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/cli"
	"github.com/mcpsidecar/mcpsidecar/internal/interrupt"
)

func main() {
	// The first signal asks for a graceful end: the command tears its
	// sandbox down and exits 130. A second one forces the exit; what is
	// left carries labels that `mcpsidecar gc` removes.
	ctx, cancel := interrupt.Context("mcpsidecar: second signal, exiting without cleanup; run: mcpsidecar gc")
	code := cli.Run(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	cancel()
	os.Exit(code)
}
