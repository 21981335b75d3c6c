//go:build linux

package roles

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

// TestHardenRoleWithoutPolicy covers the paths that never restrict the test
// process: no policy (host use, or refusal where one is required) and a
// malformed policy, which must never mean "run unhardened".
func TestHardenRoleWithoutPolicy(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		required bool
		wantCode int // -1: no error
	}{
		{"host use, nothing applied", "", false, -1},
		{"agent refuses without a policy", "", true, exitUsage},
		{"malformed policy", "{not json", false, exitUsage},
		{"invalid policy", `{"schema":"mcpsidecar.harden/v1","role":"","landlock":{}}`, true, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == harden.EnvPolicy {
					return tt.value
				}
				return ""
			}
			err := hardenRole(context.Background(), "agent", getenv, io.Discard, tt.required, "")
			if tt.wantCode < 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatal("got no error")
			}
			if code, _ := exitcode.Of(err); code != tt.wantCode {
				t.Errorf("got exit code %d, want %d (%v)", code, tt.wantCode, err)
			}
		})
	}
}

// TestHardenRoleRlimits: the limits of harden.EnvRlimits are set before
// the policy is applied and recorded as a layer of the report; a
// malformed value is a usage error and nothing is applied. Both appliers
// are faked: the real ones would restrict the test process.
func TestHardenRoleRlimits(t *testing.T) {
	origH, origR := applyHarden, applyRlimits
	t.Cleanup(func() { applyHarden, applyRlimits = origH, origR })
	var order []string
	applyRlimits = func(ls []harden.Rlimit) (harden.LayerStatus, error) {
		order = append(order, "rlimits")
		if len(ls) != 2 || ls[0] != (harden.Rlimit{Name: "fsize", Soft: 64, Hard: 64}) {
			t.Errorf("limits %v", ls)
		}
		return harden.LayerStatus{Name: harden.LayerRlimits, Required: true, Enforced: true, Detail: "d"}, nil
	}
	applyHarden = func(p harden.Policy) (harden.Report, error) {
		order = append(order, "policy")
		return harden.Report{Schema: harden.ReportSchema, Role: p.Role, Layers: []harden.LayerStatus{{Name: harden.LayerLandlockFS, Enforced: true}}}, nil
	}
	policy := `{"schema":"mcpsidecar.harden/v1","role":"agent","landlock":{}}`
	env := map[string]string{harden.EnvPolicy: policy, harden.EnvRlimits: "fsize=64:64,nofile=8:8"}
	dir := t.TempDir()
	if err := hardenRole(context.Background(), "agent", func(k string) string { return env[k] }, io.Discard, true, dir); err != nil {
		t.Fatal(err)
	}
	if want := []string{"rlimits", "policy"}; !slices.Equal(order, want) {
		t.Errorf("applied %v, want %v", order, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, harden.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harden.ParseReport(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Layers, func(l harden.LayerStatus) bool { return l.Name == harden.LayerRlimits && l.Enforced }) {
		t.Errorf("no enforced %s layer in the report: %+v", harden.LayerRlimits, rep.Layers)
	}

	order = nil
	env[harden.EnvRlimits] = "nproc=512:512"
	err = hardenRole(context.Background(), "agent", func(k string) string { return env[k] }, io.Discard, true, "")
	if code, _ := exitcode.Of(err); err == nil || code != exitUsage {
		t.Errorf("got %v (code %d), want exit code %d", err, code, exitUsage)
	}
	if len(order) != 0 {
		t.Errorf("applied %v after a malformed %s", order, harden.EnvRlimits)
	}
}
