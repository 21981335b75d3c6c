package verdict

import (
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestKernelRefusal: a role that stopped because the engine's kernel
// lacks a required layer ends the run with exit code 5, naming the layer,
// the ABI measured inside and the spec key that accepts it; a layer
// accepted as best effort (a degradation, no refusal) does not.
func TestKernelRefusal(t *testing.T) {
	five := 5
	refused := runs.RoleHardening{Source: runs.SourceRoleReport, Layers: []runs.HardeningLayer{{Name: harden.LayerLandlockFS, Required: true}},
		Error:   "hardening layer landlock-fs cannot be enforced (kernel Landlock ABI 0)",
		Refused: &runs.Refusal{Layer: harden.LayerLandlockFS, KernelABI: 0, Reason: "filesystem rules need Landlock ABI >= 3 (min_abi 4)"}}
	degraded := runs.RoleHardening{Source: runs.SourceRoleReport, Layers: []runs.HardeningLayer{{Name: harden.LayerLandlockFS}},
		Degradations: []string{"landlock-fs: not fully enforced (kernel Landlock ABI 0)"}}
	record := func(h runs.RoleHardening) Record {
		return Record{Dir: t.TempDir(), Workload: WorkloadCheck, Started: true, Planned: []string{roleGateway},
			Containers: []Container{{Role: roleGateway, Started: true, ExitCode: &five}},
			Hardening:  map[string]runs.RoleHardening{roleGateway: h}}
	}
	err := Judge(record(refused)).Err
	code, hint := exitcode.Of(err)
	if code != exitcode.Unavailable {
		t.Fatalf("exit code %d (%v), want %d", code, err, exitcode.Unavailable)
	}
	for _, want := range []string{"landlock-fs", "Landlock ABI 0", "gateway", "min_abi 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if want := spec.KeyBestEffort + ` = ["landlock-fs"]`; !strings.Contains(hint, want) || !strings.Contains(hint, "degradation") {
		t.Errorf("hint %q, want the spec key (%s) and that it is recorded as a degradation", hint, want)
	}
	if err := Judge(record(degraded)).Err; err != nil {
		t.Errorf("a layer accepted as best effort ended the run: %v", err)
	}
}

// TestKernelRefusalOwnWorkloadIgnored: a refusal in the agent role's
// report under a user's workload (which writes that directory) is not
// believed; the same refusal from our gateway is.
func TestKernelRefusalOwnWorkloadIgnored(t *testing.T) {
	zero := 0
	refused := runs.RoleHardening{Source: runs.SourceRoleReport,
		Refused: &runs.Refusal{Layer: harden.LayerLandlockFS, KernelABI: 0, Reason: "forged"}}
	r := Record{Own: true, Containers: []Container{{Role: roleAgent, Started: true, ExitCode: &zero}},
		Hardening: map[string]runs.RoleHardening{roleAgent: refused}}
	if err := kernelRefusal(r); err != nil {
		t.Errorf("a refusal in the own workload's report was believed: %v", err)
	}
	r.Containers = append(r.Containers, Container{Role: roleGateway, Started: true, ExitCode: &zero})
	r.Hardening[roleGateway] = refused
	if code, _ := exitcode.Of(kernelRefusal(r)); code != exitcode.Unavailable {
		t.Errorf("the gateway's refusal: exit %d, want %d", code, exitcode.Unavailable)
	}
}
