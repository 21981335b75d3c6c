//go:build linux

package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// sampleReport is a fixed report covering every outcome and verdict.
func sampleReport() *Report {
	mk := func(id, title string, g Goal, tool Outcome) Capability {
		c := Capability{ID: id, Title: title, Threat: "a threat",
			Shell: newResult(NA, noShell, ""), Tool: newResult(tool, "tool "+string(tool), "evidence TOKEN=abc"),
			Alternates: runAlternates(context.Background(), nil)}
		Judge(g, &c)
		return c
	}
	return &Report{Groups: []Group{
		{ID: "G01", Title: "Runtime identity and execution context", Capabilities: []Capability{
			mk("T01", "Identify current working directory", GoalAny, Allowed),
			mk("T14", "Detect Windows integrity and containment status", GoalNone, NA),
		}},
		{ID: "G40", Title: "mcpsidecar design claims", Capabilities: []Capability{
			mk("T01", "Run without a seccomp filter", GoalDeny, Denied),
			mk("T04", "Use a default route out of the sandbox", GoalDeny, Allowed),
			mk("T08", "Reach the MCP sidecar", GoalAllow, Error),
		}},
	}}
}

// golden compares got with testdata/name, or rewrites it with -update
// (internal/testutil).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got)
}

func TestReportSchemaGolden(t *testing.T) {
	data, err := sampleReport().Encode(false)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.json", data)
	// The seed's shape: a bare array of groups, capabilities with shell,
	// tool and alternates, every evidence "[REMOVED]".
	var raw []map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("report is not the seed's array shape: %v", err)
	}
	if strings.Contains(string(data), "TOKEN") && !strings.Contains(string(data), removed) {
		t.Error("evidence not removed")
	}
}

func TestEncodeSerializeEvidenceStillRedacts(t *testing.T) {
	data, err := sampleReport().Encode(true)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if strings.Contains(s, removed) || !strings.Contains(s, "TOKEN=[REDACTED]") || strings.Contains(s, "abc") {
		t.Errorf("--serialize-evidence must keep redacted evidence:\n%s", s)
	}
}

func TestLoadReport(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "report.json")
	data, _ := sampleReport().Encode(false)
	os.WriteFile(good, data, 0o644)
	r, err := LoadReport(good)
	if err != nil {
		t.Fatal(err)
	}
	if r.Probes() != 5 || r.Violations() != 1 || r.Counts()[Unsupported] != 2 {
		t.Errorf("loaded %d probes, %d violations, counts %v", r.Probes(), r.Violations(), r.Counts())
	}
	for name, content := range map[string]string{
		"not json":           "{",
		"object not array":   `{"id":"G01"}`,
		"group without id":   `[{"title":"x","capabilities":[]}]`,
		"probe without id":   `[{"id":"G01","capabilities":[{"title":"x"}]}]`,
		"wrong outcome type": `[{"id":"G01","capabilities":[{"id":"T01","tool":{"outcome":3}}]}]`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.json")
			os.WriteFile(p, []byte(content), 0o644)
			if _, err := LoadReport(p); err == nil || !strings.Contains(err.Error(), "bad.json") {
				t.Errorf("got %v, want an error naming the file", err)
			}
		})
	}
	if _, err := LoadReport(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestShow(t *testing.T) {
	var tbl, md bytes.Buffer
	r := sampleReport()
	if err := r.WriteTable(&tbl); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	golden(t, "show.golden.txt", tbl.Bytes())
	golden(t, "show.golden.md", md.Bytes())
}

func TestDiff(t *testing.T) {
	old := sampleReport()
	cur := sampleReport()
	// Seccomp went from pass to violation; the route from violation to
	// pass; a probe vanished; a new one appeared.
	c := cur.Find("G40", "T01")
	c.Tool = newResult(Allowed, "no filter", "")
	Judge(GoalDeny, c)
	c = cur.Find("G40", "T04")
	c.Tool = newResult(Denied, "no route", "")
	Judge(GoalDeny, c)
	cur.Groups[0].Capabilities = cur.Groups[0].Capabilities[:1]
	cur.Groups[1].Capabilities = append(cur.Groups[1].Capabilities, Capability{ID: "T99", Title: "new", Verdict: Pass})
	changes := Diff(old, cur)
	var got []string
	for _, ch := range changes {
		got = append(got, ch.Group+"/"+ch.ID+map[bool]string{true: " worse", false: ""}[ch.Worse])
	}
	want := []string{"G40/T01 worse", "G40/T04", "G40/T99", "G01/T14"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diff mismatch (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	worse, err := WriteDiff(&out, changes)
	if err != nil || worse != 1 || !strings.Contains(out.String(), "4 probe(s) changed, 1 got worse") {
		t.Errorf("WriteDiff: worse %d, err %v, out:\n%s", worse, err, out.String())
	}
	if len(Diff(old, sampleReport())) != 0 {
		t.Error("identical reports differ")
	}
}

// TestDiffSeedReports: reports without verdicts (the seed's) are compared
// by outcome: a tool path that became Allowed got worse.
func TestDiffSeedReports(t *testing.T) {
	seed := func(o Outcome) *Report {
		return &Report{Groups: []Group{{ID: "G09", Capabilities: []Capability{{ID: "T07", Tool: Result{Outcome: o}}}}}}
	}
	ch := Diff(seed(Denied), seed(Allowed))
	if len(ch) != 1 || !ch[0].Worse {
		t.Errorf("got %+v, want one worse change", ch)
	}
	if ch := Diff(seed(Allowed), seed(Denied)); len(ch) != 1 || ch[0].Worse {
		t.Errorf("got %+v, want one better change", ch)
	}
}

// TestRunWritesOutputs runs a small catalogue through the engine.
func TestRunWritesOutputs(t *testing.T) {
	dir := t.TempDir()
	c := DefaultContext()
	c.WorkingDirectory, c.AllowedDirectory = dir, filepath.Join(dir, "allowed")
	probes := []Probe{
		{Group: "G90", ID: "T01", Title: "allowed", Goal: GoalDeny, Threat: "t", Tool: fixed(allowed("yes", "API_KEY=x"))},
		{Group: "G90", ID: "T02", Title: "panics", Goal: GoalAny, Threat: "t", Tool: func(context.Context, *Env) Result { panic("boom") }},
	}
	rep, err := Run(context.Background(), c, Options{OutDir: dir, Groups: []GroupInfo{{"G90", "test"}}, Probes: probes, Self: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Violations() != 1 || rep.Find("G90", "T02").Verdict != Unsupported {
		t.Errorf("verdicts: %+v", rep.Groups)
	}
	for _, f := range []string{"report.json", "done.json", "status.ndjson"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "status.ndjson"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1+2*5 {
		t.Errorf("status.ndjson has %d lines, want 11", len(lines))
	}
	if strings.Contains(string(data), "API_KEY") {
		t.Error("status.ndjson carries evidence")
	}
	report, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if strings.Contains(string(report), "API_KEY") {
		t.Error("report.json carries evidence by default")
	}
	if _, err := os.Stat(filepath.Join(dir, "allowed", "allowed", "allowed.txt")); err != nil {
		t.Errorf("allowed fixture not created: %v", err)
	}
}
