package redact

import (
	"strings"
	"testing"
)

// TestString has a case per pattern. The missedBy column names the copy
// (internal/sidecar or internal/probe, before this package replaced both)
// that let the value through; it was checked against both copies.
func TestString(t *testing.T) {
	const r = Marker
	tests := []struct {
		name, in, want string
		missedBy       string
	}{
		{"pem private key", "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nb", "a\n" + r + "\nb", ""},
		{"pem escaped in json", `{"k":"-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----"}`, `{"k":"` + r + `"}`, ""},
		{"pem of another type", "-----BEGIN OPENSSH CERTIFICATE KEY-----\nAAAA\n-----END OPENSSH CERTIFICATE KEY-----", r, "probe"},
		{"pem unterminated", "x -----BEGIN EC PRIVATE KEY-----\nMHcCAQEE", "x " + r, "probe"},
		{"two pem blocks stay separate", "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY----- mid -----BEGIN PRIVATE KEY-----\ny\n-----END PRIVATE KEY-----", r + " mid " + r, ""},
		{"secret-named line", "OPENAI_API_KEY=abc123", "OPENAI_API_KEY=" + r, "sidecar"},
		{"secret-named line with spaces", "My Api Key : hunter2", "My Api Key : " + r, "sidecar"},
		{"cookie line", "Cookie: a=b", "Cookie: " + r, "sidecar"},
		{"session line", "SESSION_ID=42", "SESSION_ID=" + r, "sidecar"},
		{"only the secret line of many", "name=x\nTOKEN=y\nother=z", "name=x\nTOKEN=" + r + "\nother=z", "sidecar"},
		{"aws secret assignment", "cfg; aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "cfg; aws_secret_access_key = " + r, "probe"},
		// The sidecar kept " upstream"; the line rule drops the rest of the line.
		{"secret-named line goes whole", "sent Authorization: Bearer abcdefgh12345678 upstream", "sent Authorization: " + r, ""},
		{"bearer in json", `header {"Authorization": "Bearer abcdefgh12345678"}`, `header {"Authorization": "` + r + `"}`, "probe"},
		{"generic assignment in json", `{"password":"hunter2hunter2"}`, `{"password":"` + r + `"}`, "probe"},
		{"api_key assignment mid-line", "use; api_key=abcdef123456 here", "use; api_key=" + r + " here", "probe"},
		{"anthropic key", "using sk-ant-api03_AbC-9 now", "using " + r + " now", "sidecar"},
		{"openai key", "key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx123 end", "key " + r + " end", ""},
		{"short sk- key", "key sk-proj-abc_DEF-1 end", "key " + r + " end", "sidecar"},
		{"github classic token", "ghp_abcDEF123 here", r + " here", "sidecar"},
		{"github server token", "tok ghs_1234567890abcdefghijABCD end", "tok " + r + " end", "probe"},
		{"github fine-grained", "github_pat_11AB_cd", r, "sidecar"},
		{"aws access key id", "id AKIAIOSFODNN7EXAMPLE", "id " + r, ""},
		{"aws temporary key id", "id ASIAIOSFODNN7EXAMPLE end", "id " + r + " end", "probe"},
		{"google api key", "AIzaSyA-1_b", r, "sidecar"},
		{"hugging face token", "hf_AbCd-1_x", r, "sidecar"},
		{"slack token", "xoxb-123456789012-abcdefABCDEF", r, "probe"},
		{"jwt", "t eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "t " + r, "probe"},
		{"token needs a word boundary", "mask-abc", "mask-abc", ""},
		{"a word is not a temporary key", "ASIAN markets", "ASIAN markets", ""},
		{"plain text", "Use IHttpClientFactory; see https://learn.microsoft.com/dotnet", "Use IHttpClientFactory; see https://learn.microsoft.com/dotnet", ""},
		{"status line", "status=403; via=gateway", "status=403; via=gateway", ""},
		{"empty", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestTokensFound: every shape finds its own example and names it.
func TestTokensFound(t *testing.T) {
	examples := map[string]string{
		"an sk-ant- key": "sk-ant-api03-0123456789abcdef", "an sk- key": "sk-0123456789abcdef",
		"a ghp_ token": "ghp_0123456789abcdefABCD", "a GitHub token": "gho_0123456789abcdefABCD",
		"a github_pat_ token": "github_pat_0123456789", "an AKIA access key id": "AKIAIOSFODNN7EXAMPLE",
		"an ASIA access key id": "ASIAIOSFODNN7EXAMPLE", "an AIza key": "AIzaSyA-0123456789",
		"an hf_ token": "hf_0123456789abcdef", "a Slack token": "xoxp-0123456789-abc",
		"a JSON Web Token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
	}
	if len(examples) != len(Tokens) {
		t.Fatalf("%d examples for %d shapes", len(examples), len(Tokens))
	}
	for _, tok := range Tokens {
		ex, ok := examples[tok.Name]
		if !ok {
			t.Errorf("no example for %q", tok.Name)
			continue
		}
		if got := tok.FindAll("a " + ex + " b"); len(got) != 1 || got[0] != ex {
			t.Errorf("%s: FindAll = %q, want [%q]", tok.Name, got, ex)
		}
		if got := String("a " + ex + " b"); strings.Contains(got, ex) {
			t.Errorf("%s: String kept it: %q", tok.Name, got)
		}
	}
}

func TestSecretName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"OPENAI_API_KEY", true}, {"GITHUB_TOKEN", true}, {"AWS_SECRET_ACCESS_KEY", true},
		{"PGPASSWORD", true}, {"NPM_AUTH", true}, {"GOOGLE_CREDENTIALS", true}, {"ssh_private_file", true},
		{"OPENAI_MODEL", false}, {"OPENAI_BASE_URL", false}, {"HTTP_PROXY", false}, {"REGION", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SecretName(tt.name); got != tt.want {
				t.Errorf("SecretName(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestURLPassword(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://bot:hunter2pw@model.e2e.test/v1", "hunter2pw"},
		{"https://bot@model.e2e.test/v1", ""},
		{"http://model.e2e.test/v1", ""},
		{"%zz", ""},
	}
	for _, tt := range tests {
		if got := URLPassword(tt.in); got != tt.want {
			t.Errorf("URLPassword(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestValues(t *testing.T) {
	secrets := []string{"sk-live-123456", "ab1", ""}
	tests := []struct{ name, in, want string }{
		{"long value anywhere", "xsk-live-123456y", "x<r>y"},
		{"short value as a token", "token=ab1\n", "token=<r>\n"},
		{"short value at both ends", "ab1 and ab1", "<r> and <r>"},
		{"short value inside words kept", "cab1 ab12 xab1y", "cab1 ab12 xab1y"},
		{"short value mixed", "ab1ab1 ab1", "ab1ab1 <r>"},
		{"nothing to do", "plain", "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Values([]byte(tt.in), secrets, "<r>")); got != tt.want {
				t.Errorf("Values(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
