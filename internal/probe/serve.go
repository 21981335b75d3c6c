//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
)

// takeSnapshot is TakeSnapshot; the test that checks the start order
// replaces it.
var takeSnapshot = TakeSnapshot

// Serve runs the suite in the probe role's order: the container's cgroup
// limits are read first (the policy may hide /sys), then harden is
// called, and only then does any probe run, so the suite measures the
// sandbox as the agent sees it. harden installs the in-process
// restrictions (a no-op hook measures the container unhardened, to show
// that each probe can report a violation). A harden error is returned as
// it is, and no probe runs; opts.Snapshot is set here.
func Serve(ctx context.Context, c *Context, opts Options, harden func() error) (*Report, error) {
	if harden == nil {
		return nil, errors.New("probe: no harden hook")
	}
	opts.Snapshot = takeSnapshot()
	if err := harden(); err != nil {
		return nil, err
	}
	rep, err := Run(ctx, c, opts)
	if err != nil {
		return nil, fmt.Errorf("running the probe suite: %w", err)
	}
	return rep, nil
}
