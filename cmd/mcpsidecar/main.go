// Command mcpsidecar is the single binary behind every role of the sandbox:
// the host CLI (run, doctor, test-sandbox, spec, runs, gc, report) and the
// in-container roles (sidecar, gateway, agent, probe). See internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpsidecar/mcpsidecar/internal/cli"
)

// exitForced is the status of a second, forcing signal (128+SIGINT).
const exitForced = 130

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	// On Windows, Go delivers Ctrl-C and Ctrl-Break as os.Interrupt, and
	// the console's close, logoff and shutdown events as SIGTERM.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks for a graceful end: the command tears its
		// sandbox down and exits 130. A second one forces the exit; what
		// is left carries labels that `mcpsidecar gc` removes.
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "mcpsidecar: second signal, exiting without cleanup; run: mcpsidecar gc")
		os.Exit(exitForced)
	}()
	code := cli.Run(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	cancel()
	os.Exit(code)
}
