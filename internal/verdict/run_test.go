package verdict

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// The run directory's files, by the names the host writes them under.
const (
	metadataFile = runs.MetadataFile
	answerFile   = runs.FileAnswer
	stdoutFile   = runs.FileStdout
	auditFile    = runs.FileAudit
	turnsFile    = runs.FileAgentTurns
)

const (
	goodMeta  = `{"schema":"mcpsidecar.run/v1","containers":[{"role":"gateway","exit_code":0},{"role":"agent","exit_code":0}]}`
	goodAudit = `{"kind":"resources/read","name":"mcp-sidecar://instructions/answer-format.md","ok":true,"correlation_id":"c1"}
{"kind":"tools/call","name":"microsoft_code_sample_search","arguments":{"query":"q","language":"csharp"},"ok":true,"correlation_id":"c2"}
`
	goodTurns = `{"turn":1,"kind":"model_request","correlation_id":"m1","ok":true}
{"turn":1,"kind":"tool_call","tool":"read_answer_format","correlation_id":"c1","ok":true}
{"turn":2,"kind":"tool_call","tool":"microsoft_code_sample_search","correlation_id":"c2","ok":true}
{"turn":3,"kind":"tool_call","tool":"save_answer","ok":false,"error":"refused: x"}
`
)

func TestCheckRun(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  map[string]bool // check name -> ok
	}{
		{"success", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A\n", auditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"agent failed", map[string]string{metadataFile: strings.Replace(goodMeta, `"agent","exit_code":0`, `"agent","exit_code":1`, 1), answerFile: "A", stdoutFile: "A", auditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: false, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"no metadata", map[string]string{answerFile: "A", stdoutFile: "A", auditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: false, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"answer differs", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "B", auditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: false, CheckFormatRead: true, CheckSampleSearch: true}},
		{"two trailing newlines differ", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A\n\n", auditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: false, CheckFormatRead: true, CheckSampleSearch: true}},
		{"no answer", map[string]string{metadataFile: goodMeta, stdoutFile: "", auditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: false, CheckFormatRead: true, CheckSampleSearch: true}},
		{"search failed", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A", auditFile: strings.Replace(goodAudit, `"csharp"},"ok":true`, `"csharp"},"ok":false`, 1)},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: false}},
		{"no audit", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A"},
			map[string]bool{CheckAuditComplete: false, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: false, CheckSampleSearch: false}},
		{"torn audit", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A", auditFile: goodAudit + `{"kind":"tools/ca`},
			map[string]bool{CheckAuditComplete: false, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: false, CheckSampleSearch: false}},
		{"a call not audited", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A", auditFile: goodAudit, turnsFile: goodTurns + `{"turn":4,"kind":"tool_call","tool":"x","correlation_id":"c9","ok":true}`},
			map[string]bool{CheckAuditComplete: false, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"no turns", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A", auditFile: goodAudit, turnsFile: ""},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"a call started with no end line", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A", auditFile: goodAudit + `{"kind":"call_start","name":"x","ok":true,"correlation_id":"c9"}` + "\n", turnsFile: goodTurns + `{"turn":4,"kind":"tool_call","tool":"x","correlation_id":"c9","ok":true}`},
			map[string]bool{CheckAuditComplete: false, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"a started call ended interrupted", map[string]string{metadataFile: goodMeta, answerFile: "A", stdoutFile: "A", auditFile: goodAudit + `{"kind":"call_start","name":"x","ok":true,"correlation_id":"c9"}` + "\n" + `{"kind":"tools/call","name":"x","ok":false,"error":"interrupted: x","interrupted":true,"correlation_id":"c9"}` + "\n", turnsFile: goodTurns + `{"turn":4,"kind":"tool_call","tool":"x","correlation_id":"c9","ok":false}`},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"bad metadata", map[string]string{metadataFile: "{", answerFile: "A", stdoutFile: "A", auditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: false, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := tt.files[turnsFile]; !ok {
				os.WriteFile(filepath.Join(dir, turnsFile), []byte(goodTurns), 0o644)
			}
			rc := CheckRun(dir, "")
			got := map[string]bool{}
			wantOK := true
			for _, c := range rc.Checks {
				got[c.Name] = c.OK
				if c.Detail == "" {
					t.Errorf("check %q has no detail", c.Name)
				}
			}
			for _, ok := range tt.want {
				wantOK = wantOK && ok
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("checks mismatch (-want +got):\n%s", diff)
			}
			if rc.OK != wantOK {
				t.Errorf("OK = %v, want %v", rc.OK, wantOK)
			}
		})
	}
}

func TestCheckRunRefusesPlantedLink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("A"), 0o644)
	os.WriteFile(filepath.Join(dir, stdoutFile), []byte("A"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, answerFile)); err != nil {
		t.Fatal(err)
	}
	rc := CheckRunExit(dir, 0, "")
	for _, c := range rc.Checks {
		if c.Name == CheckAnswerStdout && (c.OK || !strings.Contains(c.Detail, "link")) {
			t.Errorf("answer check = %+v, want refused link", c)
		}
	}
	if rc.OK {
		t.Error("verdict OK with a planted link")
	}
}

// A question of the user's own is not judged by the seed's task: no format
// read or code-sample search is required.
func TestCheckRunCustomQuestion(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{answerFile: "A", stdoutFile: "A\n", auditFile: "", turnsFile: `{"turn":1,"kind":"answer_saved","ok":true}` + "\n"} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	rc := CheckRunExit(dir, 0, "What is 2+2?")
	var names []string
	for _, c := range rc.Checks {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{CheckAgentExit, CheckAnswerStdout, CheckAuditComplete}, names); !rc.OK || diff != "" {
		t.Errorf("OK=%v checks %+v (-want +got names):\n%s", rc.OK, rc.Checks, diff)
	}
	if seed := CheckRunExit(dir, 1, agent.DefaultQuestion); seed.OK || seed.Checks[0].Detail != "want 0, got 1" || len(seed.Checks) != 5 {
		t.Errorf("seed task verdict %+v, want failed with the exit check saying want 0, got 1", seed)
	}
}
