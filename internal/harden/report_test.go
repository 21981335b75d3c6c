package harden

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// sampleReport is a report as Apply fills it on an ABI 3 kernel with
// landlock-net accepted as best effort.
func sampleReport() Report {
	return Report{
		Schema: ReportSchema, Role: "agent", KernelLandlockABI: 3, EnforcedLandlockABI: 3,
		Kernel: Kernel{Release: "6.1.0", Seccomp: SeccompLoaded, Cgroup: "v2", MemoryLimitBytes: 536870912, PidsLimit: 128},
		Layers: []LayerStatus{
			{Name: LayerLandlockFS, Required: true, Enforced: true, Detail: "ABI 3 ruleset"},
			{Name: LayerLandlockNet, Detail: "landlock-net: not fully enforced (kernel Landlock ABI 3): TCP connect/bind rules need Landlock ABI >= 4; accepted as best effort"},
			{Name: LayerSyscallDeny, Required: true, Enforced: true, Detail: "seccomp filter, all threads (TSYNC)"},
			{Name: LayerNoSpawn, Required: true, Enforced: true, Detail: "seccomp filter, all threads (TSYNC)"},
			{Name: LayerNoUnix, Required: true, Enforced: true, Detail: "seccomp filter, all threads (TSYNC)"},
		},
		Degradations:   []string{"landlock-net: not fully enforced (kernel Landlock ABI 3): TCP connect/bind rules need Landlock ABI >= 4; accepted as best effort"},
		NoNewPrivs:     true,
		DeniedSyscalls: []string{"ptrace", "execve", "socket(AF_UNIX)"},
		MissingPaths:   []string{"/sandbox-work"},
		GoMaxProcs:     1, GoMemLimitBytes: 402653184, SIGXFSZIgnored: true, DurationMicros: 512,
	}
}

// TestReportGolden pins the report's JSON: the host merges it into
// landlock-policy.json and run-metadata.json by these field names.
func TestReportGolden(t *testing.T) {
	dir := t.TempDir()
	if err := WriteReport(dir, sampleReport()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "harden-report.golden.json"), got) // the report's JSON
	var back Report
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleReport(), back); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

// TestWriteReportRefusesSymlink: the output directory is writable by the
// workload, which could plant the report's name as a link elsewhere.
func TestWriteReportRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, ReportFile)); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(dir, sampleReport()); err == nil {
		t.Fatal("WriteReport followed a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("link target was overwritten: %q", b)
	}
}

func TestWriteReportMissingDir(t *testing.T) {
	if err := WriteReport(filepath.Join(t.TempDir(), "absent"), sampleReport()); err == nil {
		t.Fatal("WriteReport into a missing directory succeeded")
	}
}

func TestParseReport(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "harden-report.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseReport(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleReport(), got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]string{
		"not JSON":      `{"schema":`,
		"wrong schema":  `{"schema":"mcpsidecar.harden-report/v0"}`,
		"unknown field": `{"schema":"mcpsidecar.harden-report/v1","enforced":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseReport([]byte(bad)); err == nil {
				t.Errorf("ParseReport accepted %s", bad)
			}
		})
	}
}
