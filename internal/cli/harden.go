package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

// applyHarden is harden.Apply; tests replace it, since the real one
// restricts the calling process irreversibly.
var applyHarden = harden.Apply

// hardenRole locks a role down with the policy in $MCPSIDECAR_HARDEN_POLICY
// and writes the report into reportDir (skipped when empty). Without a
// policy it applies nothing (host use), unless required: the agent and
// the probe never run unhardened. Degradations are printed to errw; a layer
// the kernel cannot enforce is exit code 5.
func hardenRole(role string, getenv func(string) string, errw io.Writer, required bool, reportDir string) error {
	p, ok, err := harden.PolicyFromEnv(getenv)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if !ok {
		if required {
			return withHint(ExitUsage, fmt.Errorf("%s: %s is not set; refusing to run unhardened", role, harden.EnvPolicy),
				"the harness sets it; on the host use: mcpsidecar run")
		}
		return nil
	}
	rep, err := applyHarden(*p)
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
		return withHint(ExitUnavailable, err, "this kernel cannot enforce the layer; a spec may accept it as best effort explicitly")
	}
	if err != nil {
		return fmt.Errorf("hardening %s: %w", role, err)
	}
	return nil
}
