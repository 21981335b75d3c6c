// Package interrupt is how both of mcpsidecar's binaries (the host's and
// the slim role binary) take Ctrl-C and SIGTERM: the first signal ends the
// command's context, so it ends gracefully (a host command tears its
// sandbox down, a role syncs its record); a second one forces the exit at
// once. On Windows, Go delivers Ctrl-C and Ctrl-Break as os.Interrupt, and
// the console's close, logoff and shutdown events as SIGTERM.
package interrupt

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

// Context returns a context that the first signal ends. A second signal
// prints forced on stderr and exits with exitcode.Interrupted.
func Context(forced string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, forced)
		os.Exit(exitcode.Interrupted)
	}()
	return ctx, cancel
}
