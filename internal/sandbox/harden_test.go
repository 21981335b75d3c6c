package sandbox

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestRecordHardening: a role's report reaches run-metadata's hardening
// and degradations and landlock-policy.json's enforced ABI, marked as the
// role's claim; an unreadable report is recorded as such; a role without
// one is left out.
func TestRecordHardening(t *testing.T) {
	sp, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := spec.Resolve(sp)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := runs.Create(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var errb bytes.Buffer
	j := &job{s: Output{Err: &errb}, dir: dir, profile: prof, meta: runs.Metadata{Degradations: []string{"old engine"}}}
	roles := []string{orchestrate.RoleGateway, orchestrate.RoleSidecar, orchestrate.RoleAgent}
	for _, r := range roles {
		if _, err := dir.MkdirOutput(r, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
	}
	deg := "landlock-net: not fully enforced (kernel Landlock ABI 3); accepted as best effort"
	rep := harden.Report{Schema: harden.ReportSchema, Role: "agent", KernelLandlockABI: 3, EnforcedLandlockABI: 3,
		Layers: []harden.LayerStatus{{Name: "landlock-fs", Required: true, Enforced: true, Detail: "ABI 3 ruleset"},
			{Name: "landlock-net", Enforced: false, Detail: deg}},
		Degradations: []string{deg}}
	if err := harden.WriteReport(filepath.Join(dir.Path, orchestrate.RoleAgent), rep); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir.Path, orchestrate.RoleSidecar, harden.ReportFile)
	if err := os.WriteFile(bad, []byte(`{"schema":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := j.recordHardening(roles); err != nil {
		t.Fatal(err)
	}

	want := map[string]runs.RoleHardening{
		orchestrate.RoleAgent: {Source: "role report", ABI: 3, KernelABI: 3, Degradations: []string{deg}, Layers: []runs.HardeningLayer{
			{Name: "landlock-fs", Required: true, Enforced: true, Detail: "ABI 3 ruleset"}, {Name: "landlock-net", Detail: deg}}},
		orchestrate.RoleSidecar: {Source: "role report", Layers: []runs.HardeningLayer{}, Degradations: []string{},
			Error: `decoding harden report: schema "other", want "mcpsidecar.harden-report/v1"`},
	}
	if diff := cmp.Diff(want, j.meta.Hardening); diff != "" {
		t.Errorf("hardening (-want +got):\n%s", diff)
	}
	wantDeg := []string{"old engine", "agent hardening degraded (role report): " + deg}
	if diff := cmp.Diff(wantDeg, j.meta.Degradations); diff != "" {
		t.Errorf("degradations (-want +got):\n%s", diff)
	}
	for _, s := range []string{"hardening agent (role report): Landlock ABI 3 enforced (kernel 3); enforced: landlock-fs; not enforced: landlock-net",
		"warning: agent hardening degraded (role report): " + deg, "warning: " + orchestrate.RoleSidecar + ": harden-report.json unreadable"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, errb.String())
		}
	}

	b, err := os.ReadFile(filepath.Join(dir.Path, "landlock-policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema   string                      `json:"schema"`
		Policies map[string]harden.Policy    `json:"policies"`
		Enforced map[string]landlockEnforced `json:"enforced"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Enforced[orchestrate.RoleAgent]; got != (landlockEnforced{Source: "role report", ABI: 3, KernelABI: 3}) {
		t.Errorf("landlock-policy.json enforced agent = %+v", got)
	}
	if _, ok := doc.Enforced[orchestrate.RoleGateway]; ok {
		t.Errorf("gateway without a report has an enforced entry: %s", b)
	}
	if diff := cmp.Diff(prof.Containers[orchestrate.RoleAgent].Harden, doc.Policies[orchestrate.RoleAgent]); diff != "" {
		t.Errorf("agent policy (-want +got):\n%s", diff)
	}
}

// TestRecordKernel: the engine's kernel, as the gateway measured it from
// inside (preferred over the agent's, which runs a workload), is recorded
// in the engine section with its source and printed in one line; a
// role's refusal reaches its hardening record.
func TestRecordKernel(t *testing.T) {
	dir, err := runs.Create(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var errb bytes.Buffer
	j := &job{s: Output{Err: &errb}, dir: dir, profile: &spec.Profile{}}
	roles := []string{orchestrate.RoleAgent, orchestrate.RoleGateway}
	for _, r := range roles {
		if _, err := dir.MkdirOutput(r, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
	}
	report := func(role, release string, refused *harden.Refusal) harden.Report {
		return harden.Report{Schema: harden.ReportSchema, Role: role, Refused: refused,
			Kernel: harden.Kernel{Release: release, Cgroup: "v2", MemoryLimitBytes: 1 << 28, PidsLimit: 128}}
	}
	for role, rep := range map[string]harden.Report{
		orchestrate.RoleAgent:   report(orchestrate.RoleAgent, "forged", nil),
		orchestrate.RoleGateway: report(orchestrate.RoleGateway, "6.10.14-linuxkit", &harden.Refusal{Layer: harden.LayerLandlockFS, Reason: "filesystem rules need Landlock ABI >= 3"}),
	} {
		if err := harden.WriteReport(filepath.Join(dir.Path, role), rep); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.recordHardening(roles); err != nil {
		t.Fatal(err)
	}
	want := &runs.Kernel{Source: "gateway's harden report", Release: "6.10.14-linuxkit", Cgroup: "v2", MemoryLimitBytes: 1 << 28, PidsLimit: 128}
	if diff := cmp.Diff(want, j.meta.Engine.Kernel); diff != "" {
		t.Errorf("engine kernel (-want +got):\n%s", diff)
	}
	line := "engine's kernel (measured inside the gateway): Linux 6.10.14-linuxkit, Landlock ABI 0, seccomp filter not tried (the role stopped before), cgroup v2: memory limit 268435456 bytes, pids limit 128\n"
	if !strings.Contains(errb.String(), line) {
		t.Errorf("output lacks %q:\n%s", line, errb.String())
	}
	wantRefused := &runs.Refusal{Layer: harden.LayerLandlockFS, Reason: "filesystem rules need Landlock ABI >= 3"}
	if diff := cmp.Diff(wantRefused, j.meta.Hardening[orchestrate.RoleGateway].Refused); diff != "" {
		t.Errorf("gateway's refusal (-want +got):\n%s", diff)
	}
}
