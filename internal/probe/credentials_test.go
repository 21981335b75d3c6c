//go:build linux

package probe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fake values only: none is, or was ever, a real key.
const (
	testPlaceholder = PlaceholderPrefix + "0123456789abcdef0123456789abcdef0123456789abcdef"
	testOpenAIKey   = "sk-test-0123456789abcdefABCDEF0123"
	testGitHubToken = "ghp_0123456789abcdefABCDEF0123456789ab"
)

func TestIsPlaceholder(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{testPlaceholder, true},
		{strings.ToUpper(testPlaceholder), false},
		{PlaceholderPrefix + "0123456789abcdef", false},
		{PlaceholderPrefix, false},
		{testPlaceholder + "0", false},
		{testPlaceholder[:len(testPlaceholder)-1] + "g", false},
		{"x" + testPlaceholder, false},
		{testOpenAIKey, false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsPlaceholder(tt.in); got != tt.want {
			t.Errorf("IsPlaceholder(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCredentialVariable(t *testing.T) {
	gateway := []CredentialPlace{{Variable: "OPENAI_API_KEY", Host: "api.openai.com", Lives: LivesGateway}}
	sandbox := []CredentialPlace{{Variable: "OPENAI_API_KEY", Host: "api.openai.com", Lives: LivesSandbox}}
	tests := []struct {
		name        string
		creds       []CredentialPlace
		specVars    []string
		key, value  string
		wantFinding string // "" = none
		wantNote    string
	}{
		{"placeholder where the gateway holds the key", gateway, nil, "OPENAI_API_KEY", testPlaceholder, "", "holds the run's placeholder"},
		{"real key where the gateway holds it", gateway, nil, "OPENAI_API_KEY", testOpenAIKey, "not the run's placeholder (its credential lives in the gateway)", ""},
		{"any other value where the gateway holds it", gateway, nil, "OPENAI_API_KEY", "ollama", "not the run's placeholder", ""},
		{"wrong-shaped placeholder", gateway, nil, "OPENAI_API_KEY", PlaceholderPrefix + "abc", "not the run's placeholder", ""},
		{"key with no credential declared", nil, nil, "OPENAI_API_KEY", testOpenAIKey, "secret-named variable", ""},
		{"placeholder with no credential declared", nil, nil, "OPENAI_API_KEY", testPlaceholder, "", "placeholder"},
		{"key in the sandbox by the spec's softening", sandbox, nil, "OPENAI_API_KEY", testOpenAIKey, "", "lives in the sandbox"},
		{"undeclared token", gateway, nil, "GITHUB_TOKEN", testGitHubToken, "secret-named variable", ""},
		{"token the spec forwards", gateway, []string{"GITHUB_TOKEN"}, "GITHUB_TOKEN", testGitHubToken, "", "environment_variables"},
		{"key shape under an innocent name", nil, nil, "NOTES", "use " + testOpenAIKey, "NOTES holds an sk- key", ""},
		{"bearer token under an innocent name", nil, nil, "HEADER", "Bearer abcdefghijklmnopqrstuvwx", "a Bearer token", ""},
		{"bearer placeholder", nil, nil, "HEADER", "Bearer " + testPlaceholder, "", ""},
		{"a path", nil, nil, "PATH", "/usr/bin:/bin", "", ""},
		{"a word that starts like a key", nil, nil, "TOPIC", "sk-learn", "", ""},
		{"an empty secret-named variable", gateway, nil, "OPENAI_API_KEY", "", "", ""},
		{"the start hold's spent token", gateway, nil, "MCPSIDECAR_HOLD_TOKEN", "0123456789abcdef0123456789abcdef", "", "release token"},
		{"another name like the hold's is any secret-named variable", gateway, nil, "MCPSIDECAR_HOLD_TOKENX", "0123456789abcdef0123456789abcdef", "secret-named variable", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultContext()
			c.Credentials, c.SpecVariables = tt.creds, tt.specVars
			kv := tt.key + "=" + tt.value
			s := newCredentialScan(c, []string{kv})
			s.environ("environment", []string{kv})
			got := strings.Join(s.findings, "; ")
			if (tt.wantFinding == "") != (got == "") || !strings.Contains(got, tt.wantFinding) {
				t.Errorf("findings %q, want %q", got, tt.wantFinding)
			}
			if notes := strings.Join(s.notes, "; "); !strings.Contains(notes, tt.wantNote) {
				t.Errorf("notes %q, want %q", notes, tt.wantNote)
			}
			r := s.result("test")
			if want := map[bool]Outcome{true: Denied, false: Allowed}[tt.wantFinding == ""]; r.Outcome != want {
				t.Errorf("outcome %s, want %s", r.Outcome, want)
			}
			if tt.value != "" && tt.value != testPlaceholder && strings.Contains(r.Summary+r.Evidence, tt.value) {
				t.Errorf("the value reached the result: %+v", r)
			}
			if strings.Contains(r.Summary, redacted) {
				t.Errorf("the summary was redacted: %q", r.Summary)
			}
		})
	}
}

func TestKeyShapes(t *testing.T) {
	none := func(string) bool { return false }
	tests := []struct {
		name, text string
		want       []string
	}{
		{"env file", "OPENAI_API_KEY=" + testOpenAIKey + "\n", []string{"an sk- key", "a value assigned to OPENAI_API_KEY"}},
		{"json config", `{"api_key": "abcdefghijkl0123"}`, []string{"a value assigned to api_key"}},
		{"netrc-like header", "Authorization: Bearer abcdefghijklmnop0123", []string{"a Bearer token"}},
		{"aws", "aws_access_key_id = AKIA0123456789ABCDEF", []string{"an AKIA access key id", "a value assigned to aws_access_key_id"}},
		{"placeholder assignment", "OPENAI_API_KEY=" + testPlaceholder, nil},
		{"url assignment", "OPENAI_BASE_URL_TOKEN=http://egress-gateway:3129/api.openai.com/v1", nil},
		{"redacted", "OPENAI_API_KEY=[REDACTED]xxxxxxxx", nil},
		{"prose", "the task-runner uses sk-learn and a token of 12", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := keyShapes(tt.text, none)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("keyShapes = %q, want %q", got, tt.want)
			}
		})
	}
	skip := func(v string) bool { return v == testOpenAIKey }
	if got := keyShapes("OPENAI_API_KEY="+testOpenAIKey, skip); len(got) != 0 {
		t.Errorf("a softened value was counted: %q", got)
	}
}

// TestReadableCredentials runs G40 T19's file search on a context whose
// directories are temporary.
func TestReadableCredentials(t *testing.T) {
	var root string
	search := func(c *Context) Result {
		return searchCredentials(context.Background(), c, filepath.Join(root, "proc"),
			[]string{c.RuntimeUserDirectory, c.RuntimeTempDirectory, c.WorkingDirectory, c.OutputDirectory})
	}
	plant := func(t *testing.T, files map[string]string) *Context {
		root = t.TempDir()
		c := DefaultContext()
		c.RuntimeUserDirectory, c.RuntimeTempDirectory = filepath.Join(root, "home"), filepath.Join(root, "tmp")
		c.WorkingDirectory, c.OutputDirectory = filepath.Join(root, "work"), filepath.Join(root, "out")
		for _, d := range []string{c.RuntimeUserDirectory, c.RuntimeTempDirectory, c.WorkingDirectory, c.OutputDirectory} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, body := range files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	t.Run("placeholder only", func(t *testing.T) {
		c := plant(t, map[string]string{"work/.env": "OPENAI_API_KEY=" + testPlaceholder + "\n", "out/answer.txt": "Use IHttpClientFactory."})
		if r := search(c); r.Outcome != Denied {
			t.Errorf("got %s: %s (%s), want Denied", r.Outcome, r.Summary, r.Evidence)
		}
	})
	t.Run("a key in a config file", func(t *testing.T) {
		c := plant(t, map[string]string{"home/.config/openai/config.json": `{"api_key": "` + testOpenAIKey + `"}`})
		r := search(c)
		if r.Outcome != Allowed || !strings.Contains(r.Evidence, ".config/openai/config.json: holds an sk- key") {
			t.Errorf("got %s: %s (%s), want Allowed naming the file", r.Outcome, r.Summary, r.Evidence)
		}
		if strings.Contains(r.Evidence, testOpenAIKey) {
			t.Errorf("the key reached the evidence: %s", r.Evidence)
		}
	})
	t.Run("a link to a key is not followed", func(t *testing.T) {
		c := plant(t, map[string]string{"elsewhere/key": testOpenAIKey})
		if err := os.Symlink(filepath.Join(filepath.Dir(c.WorkingDirectory), "elsewhere/key"), filepath.Join(c.WorkingDirectory, "key")); err != nil {
			t.Fatal(err)
		}
		if r := search(c); r.Outcome != Denied {
			t.Errorf("got %s: %s (%s), want Denied", r.Outcome, r.Summary, r.Evidence)
		}
	})
	t.Run("another process's environment and command line", func(t *testing.T) {
		c := plant(t, map[string]string{"proc/1/environ": "PATH=/bin\x00OPENAI_API_KEY=" + testOpenAIKey + "\x00",
			"proc/1/cmdline": "agent\x00--token\x00" + testGitHubToken + "\x00"})
		r := search(c)
		for _, want := range []string{"proc/1/environ: OPENAI_API_KEY (a secret-named variable)", "proc/1/cmdline: holds a ghp_ token", "1 other processes"} {
			if r.Outcome != Allowed || !strings.Contains(r.Evidence, want) {
				t.Errorf("got %s: %s (%s), want Allowed with %q", r.Outcome, r.Summary, r.Evidence, want)
			}
		}
	})
	t.Run("this process is left to G05 T05", func(t *testing.T) {
		c := plant(t, map[string]string{fmt.Sprintf("proc/%d/environ", os.Getpid()): "OPENAI_API_KEY=" + testOpenAIKey})
		if r := search(c); r.Outcome != Denied {
			t.Errorf("got %s: %s (%s), want Denied", r.Outcome, r.Summary, r.Evidence)
		}
	})
	t.Run("the softened key in a file is not counted", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", testOpenAIKey)
		c := plant(t, map[string]string{"tmp/copy": "key " + testOpenAIKey})
		c.Credentials = []CredentialPlace{{Variable: "OPENAI_API_KEY", Lives: LivesSandbox}}
		if r := search(c); r.Outcome != Denied {
			t.Errorf("got %s: %s (%s), want Denied", r.Outcome, r.Summary, r.Evidence)
		}
	})
}

func TestCredentialRootsNeverSlash(t *testing.T) {
	t.Setenv("HOME", "/")
	for _, r := range credentialRoots(DefaultContext()) {
		if r == "/" {
			t.Errorf("roots %q include /", credentialRoots(DefaultContext()))
		}
	}
}

func TestOwnEnvironment(t *testing.T) {
	t.Run("placeholder", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", testPlaceholder)
		c := DefaultContext()
		c.Credentials = []CredentialPlace{{Variable: "OPENAI_API_KEY", Lives: LivesGateway}}
		if r := ownEnvironment(c); r.Outcome != Denied || !strings.Contains(r.Evidence, "OPENAI_API_KEY holds the run's placeholder") {
			t.Errorf("got %s: %s (%s)", r.Outcome, r.Summary, r.Evidence)
		}
	})
	t.Run("real key", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", testOpenAIKey)
		c := DefaultContext()
		c.Credentials = []CredentialPlace{{Variable: "OPENAI_API_KEY", Lives: LivesGateway}}
		r := ownEnvironment(c)
		if r.Outcome != Allowed || strings.Contains(r.Evidence, testOpenAIKey) {
			t.Errorf("got %s: %s (%s), want Allowed without the value", r.Outcome, r.Summary, r.Evidence)
		}
	})
}

func TestContextCredentials(t *testing.T) {
	if _, err := ParseContext([]byte(`{"credentials": [{"variable": "OPENAI_API_KEY", "lives": "vault"}]}`)); err == nil ||
		!strings.Contains(err.Error(), "lives") {
		t.Errorf("got %v, want an error naming lives", err)
	}
	c, err := ParseContext([]byte(`{"credentials": [{"variable": "OPENAI_API_KEY", "host": "api.openai.com", "lives": "gateway"}]}`))
	if err != nil || c.livesIn("OPENAI_API_KEY") != LivesGateway || c.livesIn("OTHER") != "" {
		t.Errorf("got %+v, %v", c, err)
	}
}
