package verdict

import (
	"fmt"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// kernelRefusal is exit code 5 when a role stopped because the engine's
// kernel, as the role measured it from inside its container, cannot
// enforce a layer its policy requires: the environment lacks a layer,
// which the run's own failure (a role that exited before it was ready)
// would otherwise report as a runtime error. The message names the layer
// and the measured ABI; the hint the way to accept it.
//
// A user's workload (run --image) writes its own output directory, where
// the agent role's report lies: its refusal is not believed (red team,
// session 38: a workload that wrote one turned its own run into exit 5
// and a hint to soften the spec). The launcher that refuses there exits
// before the workload runs, and that failure stands on its own.
func kernelRefusal(r Record) error {
	for _, c := range r.Containers {
		h, ok := r.Hardening[c.Role]
		if !ok || h.Refused == nil || (r.Own && c.Role == roleAgent) {
			continue
		}
		rf := h.Refused
		return exitcode.WithHint(exitcode.Unavailable,
			fmt.Errorf("the engine's kernel cannot enforce the hardening layer %s, which the spec requires: measured inside the %s's container, Landlock ABI %d (%s)",
				rf.Layer, c.Role, rf.KernelABI, rf.Reason),
			fmt.Sprintf("to run without it, accept it in the spec with %s = [%q]: every role then records the missing layer as a degradation (run-metadata.json); or use an engine whose kernel has it (docs/platforms.md, The engine's kernel)",
				spec.KeyBestEffort, rf.Layer))
	}
	return nil
}
