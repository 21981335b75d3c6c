package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
	"github.com/mcpsidecar/mcpsidecar/internal/version"
)

// golden compares got with testdata/name, or rewrites it under -update
// (internal/testutil).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got)
}

// TestJSONGoldens: the --json document of every read command, with the
// temporary directory replaced by $RUNS. Each is one JSON object with a
// "schema" first and no null array.
func TestJSONGoldens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exit := 0
	okID := writeRun(t, dir, t0, runs.Metadata{Schema: runs.MetadataSchema, Command: "test-sandbox", Started: t0, Finished: t0.Add(3 * time.Second),
		Networks: []runs.Network{}, Containers: []runs.Container{{Role: "agent", Name: "sandbox-agent-x", ExitCode: &exit, Networks: []string{"internal"}, Aliases: []string{}}},
		Phases: []runs.Phase{{Name: "spec", Start: t0, DurationMS: 1.5, OK: true}}, Verdict: runs.Verdict{OK: true, Checks: []runs.Check{}}, Degradations: []string{}})
	writeRunReport(t, dir, okID, probe.Pass)
	oldID := writeRun(t, dir, t0.Add(-24*time.Hour), runs.Metadata{Schema: runs.MetadataSchema, Command: "test-sandbox", Started: t0, Finished: t0})
	writeRunReport(t, dir, oldID, probe.Violation)
	useEngine(t, &leftoverEngine{containers: []dockerx.Resource{leftover("c-dead", "run-x", deadPID, false)}})

	tests := []struct {
		name string
		args []string
		code int
	}{
		{"version", []string{"version", "--json"}, ExitOK},
		{"runs-list", []string{"runs", "list", "--json"}, ExitOK},
		{"runs-show", []string{"runs", "show", "--json", okID}, ExitOK},
		{"report-show", []string{"report", "show", "--json", okID}, ExitOK},
		{"report-diff", []string{"report", "diff", "--json", okID, oldID}, ExitViolation},
		{"gc", []string{"gc", "--json"}, ExitOK},
		{"spec-check", []string{"spec", "check", "--json"}, ExitOK},
		{"error", []string{"runs", "show", "--json", "run-1999"}, ExitUsage},
		{"runs-prune", []string{"runs", "prune", "--json", "--older-than", "1000000h"}, ExitOK},
		{"runs-rm", []string{"runs", "rm", "--json", oldID}, ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := run(t, append(tt.args, "--runs-dir", dir)[:len(tt.args)+2*runsDirFlag(tt.args)]...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.code, errs)
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("not one JSON object: %v\n%s", err, out)
			}
			if s, _ := doc["schema"].(string); !strings.HasPrefix(s, "mcpsidecar.") || !strings.HasPrefix(out, "{\n  \"schema\": ") {
				t.Errorf("schema %q is not first", s)
			}
			if strings.Contains(out, ": null") {
				t.Errorf("a null in:\n%s", out)
			}
			host, _ := os.Hostname()
			out = strings.ReplaceAll(out, dir, "$RUNS")
			out = strings.ReplaceAll(out, `"mcpsidecar.host": "`+host+`"`, `"mcpsidecar.host": "$HOST"`)
			out = strings.ReplaceAll(out, `"`+version.String()+`"`, `"$VERSION"`)
			out = strings.ReplaceAll(out, `"`+runtime.Version()+`"`, `"$GO"`)
			out = strings.ReplaceAll(out, `"`+runtime.GOARCH+`"`, `"$ARCH"`)
			golden(t, filepath.Join("json", tt.name+".json"), []byte(out))
		})
	}
}

// runsDirFlag is 1 when the command takes --runs-dir, else 0.
func runsDirFlag(args []string) int {
	switch args[0] {
	case "runs", "report":
		return 1
	}
	return 0
}
