package spec

import (
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/harden/hardenpolicy"
)

// KeyBestEffort is the spec key hardening_best_effort = ["landlock-fs",
// ...]: the in-container hardening layers the user accepts to run without
// when the engine's kernel cannot enforce them (a VM or a kernel built without Landlock,
// docs/platforms.md): each role then starts, records the missing layer
// as a degradation and says so, instead of stopping with exit code 5.
// Nothing is softened on a kernel that has the layer. Unset, every layer
// but landlock-net (already best effort: it needs Linux 6.7) is required.
const KeyBestEffort = "hardening_best_effort"

// checkBestEffort keeps the known layers of hardening_best_effort, once
// each, in the spec's order.
func (w *walker) checkBestEffort() {
	known := hardenpolicy.KnownLayers()
	for _, it := range w.bestEffort {
		switch {
		case !slices.Contains(known, it.val):
			w.add(it.at, it.path, "unknown hardening layer %q; the layers are %s", it.val, strings.Join(known, ", "))
		case slices.Contains(w.spec.HardeningBestEffort, it.val):
			w.add(it.at, it.path, "duplicate layer %q", it.val)
		default:
			w.spec.HardeningBestEffort = append(w.spec.HardeningBestEffort, it.val)
		}
	}
}

// acceptBestEffort adds the spec's best-effort layers to every role's
// policy (the probe and a user's workload take the agent's).
func acceptBestEffort(c *Container, layers []string) {
	for _, l := range layers {
		if !slices.Contains(c.Harden.BestEffort, l) {
			c.Harden.BestEffort = append(c.Harden.BestEffort, l)
		}
	}
}

// bestEffortLedger records each accepted layer: a softening only where
// the kernel lacks the layer, and then recorded again, as a degradation,
// by the role that ran without it.
func bestEffortLedger(s *Spec, add func(capability, layer, format string, args ...any)) {
	for _, l := range s.HardeningBestEffort {
		add(KeyBestEffort, LayerKernel, "every role runs without %s when the engine's kernel cannot enforce it (recorded as a degradation in run-metadata.json) instead of stopping with exit code 5", l)
	}
}
