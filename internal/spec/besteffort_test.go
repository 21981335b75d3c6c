package spec

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/harden/hardenpolicy"
)

// TestHardeningBestEffort: hardening_best_effort adds its layers to every
// role's policy (the probe's too), records each in the ledger, counts as
// beyond the default (a spec found in the working directory must be
// trusted first) and changes the spec's hash; without it only
// landlock-net is best effort.
func TestHardeningBestEffort(t *testing.T) {
	on := resolveFile(t, "testdata/valid/hardening_best_effort.toml")
	off := resolveFile(t, "testdata/valid/seed_mcpsidecar.toml")
	if diff := cmp.Diff([]string{hardenpolicy.LayerLandlockFS}, on.Spec.HardeningBestEffort); diff != "" {
		t.Errorf("spec mismatch (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		p    *Profile
		want []string
	}{
		{on, []string{hardenpolicy.LayerLandlockNet, hardenpolicy.LayerLandlockFS}},
		{off, []string{hardenpolicy.LayerLandlockNet}},
	} {
		containers := []Container{tt.p.Probe()}
		for _, role := range tt.p.Roles {
			containers = append(containers, tt.p.Containers[role])
		}
		for _, c := range containers {
			if diff := cmp.Diff(tt.want, c.Harden.BestEffort); diff != "" {
				t.Errorf("%s best effort mismatch (-want +got):\n%s", c.Role, diff)
			}
			policy, err := hardenpolicy.ParsePolicy([]byte(c.Env[EnvHardenPolicy]))
			if err != nil {
				t.Fatalf("%s: %v", c.Role, err)
			}
			if diff := cmp.Diff(tt.want, policy.BestEffort); diff != "" {
				t.Errorf("%s policy in its environment (-want +got):\n%s", c.Role, diff)
			}
		}
	}
	entry := func(e Softening) bool { return e.Capability == KeyBestEffort && e.Layer == LayerKernel }
	if !slices.ContainsFunc(on.Ledger, entry) || slices.ContainsFunc(off.Ledger, entry) {
		t.Errorf("ledger: want an entry for hardening_best_effort only when set:\n%+v", on.Ledger)
	}
	beyond, err := BeyondDefault(on)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(beyond, entry) {
		t.Errorf("BeyondDefault misses hardening_best_effort: %+v", beyond)
	}
	if on.SpecHash == off.SpecHash {
		t.Error("hardening_best_effort does not change the spec's hash")
	}
}
