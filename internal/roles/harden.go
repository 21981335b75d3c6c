//go:build linux

package roles

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// applyHarden is harden.Apply; tests replace it, since the real one
// restricts the calling process irreversibly.
var applyHarden = harden.Apply

// applyRlimits is harden.ApplyRlimits, for the same reason.
var applyRlimits = harden.ApplyRlimits

// hardenRole locks a role down with the policy in $MCPSIDECAR_HARDEN_POLICY
// and writes the report into reportDir (skipped when empty). Without a
// policy it applies nothing (host use), unless required: the agent and
// the probe never run unhardened. The resource limits in
// $MCPSIDECAR_RLIMITS (a pod's, which takes no ulimits) are set first,
// whenever given. Degradations are printed to errw; a layer the kernel
// cannot enforce is exit code 5. Hardened, with its report written, the
// role waits for its start hold, if any (holdRole).
func hardenRole(ctx context.Context, role string, getenv func(string) string, errw io.Writer, required bool, reportDir string) error {
	p, ok, err := harden.PolicyFromEnv(getenv)
	if err != nil {
		return withCode(exitUsage, err)
	}
	limited, err := setRlimits(role, getenv)
	if err != nil {
		return err
	}
	if !ok {
		if required {
			return withHint(exitUsage, fmt.Errorf("%s: %s is not set; refusing to run unhardened", role, harden.EnvPolicy),
				"the harness sets it; on the host use: mcpsidecar run")
		}
		return holdRole(ctx)
	}
	rep, err := applyHarden(*p)
	if limited != nil {
		rep.Layers = append(rep.Layers, *limited)
	}
	if reportDir != "" {
		if werr := harden.WriteReport(reportDir, rep); werr != nil {
			fmt.Fprintf(errw, "mcpsidecar %s: %v\n", role, werr)
		}
	}
	for _, d := range rep.Degradations {
		fmt.Fprintf(errw, "mcpsidecar %s: hardening degraded: %s\n", role, d)
	}
	var ue *harden.UnavailableError
	if errors.As(err, &ue) {
		return withHint(exitUnavailable, err, fmt.Sprintf("this kernel cannot enforce the layer; a spec may accept it explicitly with %s = [%q] (recorded as a degradation)", spec.KeyBestEffort, ue.Layer))
	}
	if err != nil {
		return fmt.Errorf("hardening %s: %w", role, err)
	}
	return holdRole(ctx)
}

// holdRole waits, before the role's work, for the start hold the harness
// set (internal/hold), then unsets it so no child waits too. It comes
// after the hardening: while the role waits, hardened, the harness reads
// the kernel's account of it from outside and removes an old engine's
// default route, so a role that ends fast cannot end unseen. A role
// stopped while held (ctx ends at SIGTERM) returns at once.
func holdRole(ctx context.Context) error { return hold.FromEnv(ctx, hold.Timeout) }

// setRlimits sets the limits in $MCPSIDECAR_RLIMITS, if any, and returns
// their layer for the report.
func setRlimits(role string, getenv func(string) string) (*harden.LayerStatus, error) {
	limits, err := harden.RlimitsFromEnv(getenv)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	if len(limits) == 0 {
		return nil, nil
	}
	st, err := applyRlimits(limits)
	if err != nil {
		return nil, fmt.Errorf("hardening %s: %w", role, err)
	}
	return &st, nil
}
