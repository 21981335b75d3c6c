package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportJSON is a report with one probe; verdict and tool outcome vary.
func reportJSON(verdict, tool string) string {
	return `[{"id":"G40","title":"mcpsidecar design claims","capabilities":[{"id":"T01","title":"Run without a seccomp filter",
"shell":{"outcome":"N/A","summary":"","evidence":"[REMOVED]"},"tool":{"outcome":"` + tool + `","summary":"s","evidence":"[REMOVED]"},
"alternates":{"outcome":"N/A","summary":"","attempts":[]},"expected":"Denied","verdict":"` + verdict + `","verdict_reason":"r"}]}]`
}

func writeReport(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReportShowCmd(t *testing.T) {
	p := writeReport(t, "report.json", reportJSON("violation", "Allowed"))
	code, out, _ := run(t, "report", "show", p)
	if code != ExitViolation || !strings.Contains(out, "G40    T01") || !strings.Contains(out, "1 probes: 0 pass, 1 violation, 0 unsupported") {
		t.Errorf("show: code %d, out:\n%s", code, out)
	}
	code, out, _ = run(t, "report", "show", "--markdown", p)
	if code != ExitViolation || !strings.HasPrefix(out, "# Sandbox Report") || !strings.Contains(out, "## Violations") {
		t.Errorf("show --markdown: code %d, out:\n%s", code, out)
	}
}

func TestReportCmdBadInput(t *testing.T) {
	bad := writeReport(t, "bad.json", "{not json")
	for _, args := range [][]string{
		{"report", "show", filepath.Join(t.TempDir(), "missing.json")},
		{"report", "show", bad},
		{"report", "show"},
		{"report", "diff", bad, bad},
		{"report", "diff", bad},
		{"report"},
	} {
		code, _, stderr := run(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: code %d, want %d (stderr %q)", args, code, ExitUsage, stderr)
		}
	}
}

func TestReportDiffCmd(t *testing.T) {
	pass := writeReport(t, "pass.json", reportJSON("pass", "Denied"))
	viol := writeReport(t, "viol.json", reportJSON("violation", "Allowed"))
	tests := []struct {
		name     string
		old, new string
		code     int
		want     string
	}{
		{"unchanged", pass, pass, ExitOK, "0 probe(s) changed, 0 got worse"},
		{"got better", viol, pass, ExitOK, "1 probe(s) changed, 0 got worse"},
		{"got worse", pass, viol, ExitViolation, "! G40/T01 Run without a seccomp filter: pass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := run(t, "report", "diff", tt.old, tt.new)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("code %d, out:\n%s\nwant %d and %q", code, out, tt.code, tt.want)
			}
		})
	}
}
