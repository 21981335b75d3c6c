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
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/cli"
)

// exitForced is the status of a second, forcing signal (128+SIGINT).
const exitForced = 130

// holdTimeout bounds how long a held role waits for the harness.
var holdTimeout = 2 * time.Minute

func main() {
	if err := holdFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpsidecar:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
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

// holdEnv names the release file a held role waits for.
const holdEnv = "MCPSIDECAR_HOLD_FILE"

// holdFromEnv holds as $MCPSIDECAR_HOLD_FILE says, then unsets it: the hold
// is for this process only, and a child it starts (under shell_access) must
// not wait for a release file that is already gone.
func holdFromEnv() error {
	err := hold(os.Getenv(holdEnv))
	_ = os.Unsetenv(holdEnv)
	return err
}

// hold waits, before any work, until the harness creates file: it first
// prepares the container's network namespace (internal/orchestrate,
// Step.Hold). Nothing of the role has run yet, so nothing can race it.
func hold(file string) error {
	if file == "" {
		return nil
	}
	deadline := time.Now().Add(holdTimeout)
	for {
		if _, err := os.Lstat(file); err == nil {
			_ = os.Remove(file)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not released by the harness within %s (waiting for %s)", holdTimeout, file)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
