package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

func TestCheckHost(t *testing.T) {
	seed := []string{".example.com", ".gov.uk", ".microsoft.com", ".openai.com"}
	tests := []struct {
		name     string
		domains  []string
		ips      []string
		env      map[string]string
		wantErr  string // "" = accepted
		wantHint string
	}{
		{"default base URL covered", seed, nil, map[string]string{EnvAPIKey: "k"}, "", ""},
		{"fixture host covered", []string{"fake-model.e2e.test"}, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://fake-model.e2e.test/v1"}, "", ""},
		{"subdomain rule", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "https://eu.api.openai.com/v1"}, "", ""},
		{"a port entry", []string{"models.lan:11434"}, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://models.lan:11434/v1"}, "", ""},
		{"the Docker host", []string{"host.docker.internal:11434"}, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://host.docker.internal:11434/v1"}, "", ""},
		{"an IP entry with a port", nil, []string{"192.168.1.20:8000"}, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://192.168.1.20:8000/v1"}, "", ""},
		{"missing key", seed, nil, map[string]string{}, "OPENAI_API_KEY is not set", "export OPENAI_API_KEY"},
		{"host not covered", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "https://llm.internal.example.net/v1"},
			"does not allow llm.internal.example.net on port 443", `add "llm.internal.example.net" to allowed_domains in the spec`},
		{"default not covered", []string{".example.com"}, nil, map[string]string{EnvAPIKey: "k"}, "api.openai.com", `add "api.openai.com" to allowed_domains`},
		{"not a URL", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "api.openai.com/v1"}, "not an absolute http or https URL", "set OPENAI_BASE_URL to the server's /v1 URL"},
		{"ftp scheme", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "ftp://api.openai.com/v1"}, "not an absolute http or https URL", "set OPENAI_BASE_URL"},
		{"a port the entry does not name", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://ollama.example.com:11434/v1"},
			"on port 11434", `add "ollama.example.com:11434" to allowed_domains in the spec`},
		{"https on 80", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "https://api.openai.com:80/v1"}, "on port 80", `add "api.openai.com:80" to allowed_domains`},
		{"an IP not covered", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://192.168.1.20:8000/v1"}, "192.168.1.20 on port 8000", `add "192.168.1.20:8000" to allowed_ip_addresses`},
		{"localhost", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://localhost:11434/v1"}, `host "localhost" is the agent's own container`,
			`use http://host.docker.internal:11434/v1 and add "host.docker.internal:11434" to allowed_domains`},
		{"127.0.0.1", seed, nil, map[string]string{EnvAPIKey: "k", EnvBaseURL: "http://127.0.0.1:8080/v1"}, "own container", `"host.docker.internal:8080"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := netpolicy.NewConfig(tt.domains, tt.ips)
			err := CheckHost(&cfg, func(k string) string { return tt.env[k] })
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckHost: %v, want nil", err)
				}
				return
			}
			var he *HostError
			if !errors.As(err, &he) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(he.Hint, tt.wantHint) {
				t.Fatalf("CheckHost error = %v (hint %q), want one containing %q with a hint containing %q", err, hintOf(err), tt.wantErr, tt.wantHint)
			}
			if tt.env[EnvAPIKey] != "" && strings.Contains(he.Hint, EnvAPIKey) {
				t.Errorf("hint %q repeats the key hint although the key is set", he.Hint)
			}
		})
	}
}

func hintOf(err error) string {
	var he *HostError
	if errors.As(err, &he) {
		return he.Hint
	}
	return ""
}

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
		{"success", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "A\n", AuditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"agent failed", map[string]string{MetadataFile: strings.Replace(goodMeta, `"agent","exit_code":0`, `"agent","exit_code":1`, 1), AnswerFile: "A", StdoutFile: "A", AuditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: false, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"no metadata", map[string]string{AnswerFile: "A", StdoutFile: "A", AuditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: false, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"answer differs", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "B", AuditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: false, CheckFormatRead: true, CheckSampleSearch: true}},
		{"two trailing newlines differ", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "A\n\n", AuditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: false, CheckFormatRead: true, CheckSampleSearch: true}},
		{"no answer", map[string]string{MetadataFile: goodMeta, StdoutFile: "", AuditFile: goodAudit},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: false, CheckFormatRead: true, CheckSampleSearch: true}},
		{"search failed", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "A", AuditFile: strings.Replace(goodAudit, `"csharp"},"ok":true`, `"csharp"},"ok":false`, 1)},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: false}},
		{"no audit", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "A"},
			map[string]bool{CheckAuditComplete: false, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: false, CheckSampleSearch: false}},
		{"torn audit", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "A", AuditFile: goodAudit + `{"kind":"tools/ca`},
			map[string]bool{CheckAuditComplete: false, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: false, CheckSampleSearch: false}},
		{"a call not audited", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "A", AuditFile: goodAudit, TurnsFile: goodTurns + `{"turn":4,"kind":"tool_call","tool":"x","correlation_id":"c9","ok":true}`},
			map[string]bool{CheckAuditComplete: false, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"no turns", map[string]string{MetadataFile: goodMeta, AnswerFile: "A", StdoutFile: "A", AuditFile: goodAudit, TurnsFile: ""},
			map[string]bool{CheckAuditComplete: true, CheckAgentExit: true, CheckAnswerStdout: true, CheckFormatRead: true, CheckSampleSearch: true}},
		{"bad metadata", map[string]string{MetadataFile: "{", AnswerFile: "A", StdoutFile: "A", AuditFile: goodAudit},
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
			if _, ok := tt.files[TurnsFile]; !ok {
				os.WriteFile(filepath.Join(dir, TurnsFile), []byte(goodTurns), 0o644)
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
	os.WriteFile(filepath.Join(dir, StdoutFile), []byte("A"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, AnswerFile)); err != nil {
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
	for name, body := range map[string]string{AnswerFile: "A", StdoutFile: "A\n", AuditFile: "", TurnsFile: `{"turn":1,"kind":"answer_saved","ok":true}` + "\n"} {
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
	if seed := CheckRunExit(dir, 1, DefaultQuestion); seed.OK || seed.Checks[0].Detail != "want 0, got 1" || len(seed.Checks) != 5 {
		t.Errorf("seed task verdict %+v, want failed with the exit check saying want 0, got 1", seed)
	}
}
