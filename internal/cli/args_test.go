package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestRootVersionAndGroups: --version prints what version prints, and
// --help lists the in-container roles apart from the user commands.
func TestRootVersionAndGroups(t *testing.T) {
	_, want, _ := run(t, "version")
	code, got, _ := run(t, "--version")
	if code != ExitOK || got != want {
		t.Fatalf("--version = %d %q, want %q", code, got, want)
	}
	_, help, _ := run(t, "--help")
	user, roles, ok := strings.Cut(help, "In-container roles")
	if !ok {
		t.Fatalf("help has no roles group:\n%s", help)
	}
	for _, c := range []string{"agent", "gateway", "sidecar", "probe"} {
		if !strings.Contains(roles, "\n  "+c+" ") || strings.Contains(user, "\n  "+c+" ") {
			t.Errorf("%s is not in the roles group alone:\n%s", c, help)
		}
	}
	for _, c := range []string{"run", "doctor", "test-sandbox", "spec", "runs", "report", "gc", "version"} {
		if !strings.Contains(user, "\n  "+c+" ") {
			t.Errorf("%s is not among the user commands:\n%s", c, help)
		}
	}
}

// writeRunReport puts a report.json with one probe of verdict v into the
// run directory id.
func writeRunReport(t *testing.T, runsDir, id string, v probe.Verdict) string {
	t.Helper()
	r := &probe.Report{Groups: []probe.Group{{ID: "G01", Title: "g", Capabilities: []probe.Capability{{ID: "C1", Title: "c", Verdict: v}}}}}
	b, err := r.Encode(false)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(runsDir, id, reportFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunsShowLatestAndReportByRun: runs show without RUN shows the
// latest; report show and diff take run ids, prefixes, directories and
// files; report show exits 4 on a violation.
func TestRunsShowLatestAndReportByRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	meta := runs.Metadata{Schema: runs.MetadataSchema, Command: "test-sandbox", Started: t0, Finished: t0}
	oldID := writeRun(t, dir, t0, meta)
	newID := writeRun(t, dir, t0.Add(time.Hour), meta)
	writeRunReport(t, dir, oldID, probe.Pass)
	newFile := writeRunReport(t, dir, newID, probe.Violation)
	noReport := writeRun(t, dir, t0.Add(-time.Hour), meta)

	code, out, errs := run(t, "runs", "show", "--runs-dir", dir)
	if code != ExitOK || !strings.HasPrefix(out, "run "+newID+" ") {
		t.Fatalf("runs show (latest) = %d, stdout %q, stderr %s", code, out, errs)
	}
	code, _, errs = run(t, "runs", "show", "--runs-dir", t.TempDir())
	if code != ExitUsage || !strings.Contains(errs, "no runs in") {
		t.Errorf("runs show in an empty dir = %d, stderr %q", code, errs)
	}

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"show by id, pass", []string{"report", "show", oldID}, ExitOK, "G01"},
		{"show by prefix, violation", []string{"report", "show", newID[:len(newID)-1]}, ExitViolation, "1 probe(s) in"},
		{"show by dir", []string{"report", "show", filepath.Join(dir, oldID)}, ExitOK, "G01"},
		{"show by file", []string{"report", "show", newFile}, ExitViolation, "isolation violation"},
		{"show, no report", []string{"report", "show", noReport}, ExitUsage, "has no report.json (only test-sandbox runs have one)"},
		{"show, unknown", []string{"report", "show", "run-1999"}, ExitUsage, "neither a report file nor a run"},
		{"diff by ids", []string{"report", "diff", oldID, newID}, ExitViolation, "got worse"},
		{"diff, same", []string{"report", "diff", oldID, filepath.Join(dir, oldID, reportFile)}, ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := run(t, append(tt.args, "--runs-dir", dir)...)
			if code != tt.code || !strings.Contains(out+errs, tt.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tt.code, tt.want, out, errs)
			}
		})
	}
}

// TestReportNotAReport: a JSON file of another shape is named as not a
// probe report, without the decoder's Go type names.
func TestReportNotAReport(t *testing.T) {
	d := t.TempDir()
	for name, text := range map[string]string{"object.json": `{"ok": true}`, "garbage.json": "not json"} {
		path := filepath.Join(d, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := run(t, "report", "show", path)
		if code != ExitUsage || !strings.Contains(errs, path+" is not a probe report") || strings.Contains(errs, "Go value") || strings.Contains(errs, "probe.") {
			t.Errorf("%s: exit %d, stderr %q", name, code, errs)
		}
	}
}

// TestCompletion: run ids complete positional arguments; fixed flag values
// complete too.
func TestCompletion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id := writeRun(t, dir, t0, runs.Metadata{Schema: runs.MetadataSchema})
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "runs", "show", "--runs-dir", dir, ""}, []string{id}},
		{[]string{"__complete", "report", "diff", "--runs-dir", dir, id, ""}, []string{id}},
		{[]string{"__complete", "run", "--gateway-engine", ""}, []string{"ours", "squid"}},
		{[]string{"__complete", "test-sandbox", "--gateway-engine", ""}, []string{"ours", "squid"}},
		// doctor's own default is a default, not a flag already given.
		{[]string{"__complete", "doctor", "--ti"}, []string{"--timeout\tkill the workload after this long"}},
	}
	for _, tt := range tests {
		code, out, errs := run(t, tt.args...)
		got := strings.Split(strings.TrimSpace(out), "\n")
		got = got[:len(got)-1] // the last line is the directive
		if code != ExitOK || strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%v: exit %d, completions %q, want %q (%s)", tt.args, code, got, tt.want, errs)
		}
	}
}
