//go:build linux

package probe

import "testing"

func TestRedact(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"pem block", "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nb", "a\n[REDACTED]\nb"},
		{"pem block without type", "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----", "[REDACTED]"},
		{"two pem blocks stay separate", "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY----- mid -----BEGIN PRIVATE KEY-----\ny\n-----END PRIVATE KEY-----", "[REDACTED] mid [REDACTED]"},
		{"api key line", "OPENAI_API_KEY=abc123", "OPENAI_API_KEY=[REDACTED]"},
		{"api key with spaces and colon", "My Api Key : hunter2", "My Api Key : [REDACTED]"},
		{"token line lower case", "github_token = xyz", "github_token = [REDACTED]"},
		{"password line", "DB_PASSWORD: s3cret", "DB_PASSWORD: [REDACTED]"},
		{"secret line", "client.secret=zzz", "client.secret=[REDACTED]"},
		{"cookie line", "Cookie: a=b", "Cookie: [REDACTED]"},
		{"session line", "SESSION_ID=42", "SESSION_ID=[REDACTED]"},
		{"credential line", "AWS (credential) = q", "AWS (credential) = [REDACTED]"},
		{"auth line", "Authorization: Bearer x", "Authorization: [REDACTED]"},
		{"only the secret line of many", "name=x\nTOKEN=y\nother=z", "name=x\nTOKEN=[REDACTED]\nother=z"},
		{"anthropic token", "using sk-ant-api03_AbC-9 now", "using [REDACTED] now"},
		{"openai token", "key sk-proj-abc_DEF-1 end", "key [REDACTED] end"},
		{"github classic token", "ghp_abcDEF123 here", "[REDACTED] here"},
		{"github fine-grained token", "github_pat_11AB_cd", "[REDACTED]"},
		{"aws access key id", "id AKIAIOSFODNN7EXAMPLE", "id [REDACTED]"},
		{"google api key", "AIzaSyA-1_b", "[REDACTED]"},
		{"hugging face token", "hf_AbCd-1_x", "[REDACTED]"},
		{"token needs a word boundary", "mask-abc", "mask-abc"},
		{"plain text untouched", "status=403; via=gateway", "status=403; via=gateway"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestResultsAreRedacted: a secret never survives into a result, even in
// memory (the seed's always-on layer).
func TestResultsAreRedacted(t *testing.T) {
	r := allowed("read OPENAI_API_KEY=sk-abc", "OPENAI_API_KEY=sk-abc")
	if r.Summary != "read OPENAI_API_KEY=[REDACTED]" || r.Evidence != "OPENAI_API_KEY=[REDACTED]" {
		t.Errorf("got summary %q evidence %q", r.Summary, r.Evidence)
	}
}
