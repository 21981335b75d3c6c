//go:build linux

package sidecar

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, mustNotContain string
	}{
		{"openai key", "key is sk-proj-AbCdEfGhIjKlMnOpQrStUvWx123", "AbCdEfGhIjKlMnOp"},
		{"bearer token", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abcdef", "eyJhbGci"},
		{"pem block", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"},
		{"pem escaped in json", `{"k":"-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----"}`, "MIIEvQ"},
		{"aws access key", "AKIAIOSFODNN7EXAMPLE in config", "IOSFODNN7"},
		{"aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"},
		{"github classic", "token ghp_1234567890abcdefghijABCDEFGHIJ123456", "1234567890abcdefghij"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789"},
		{"slack", "xoxb-123456789012-abcdefABCDEF", "123456789012-abcdef"},
		{"password assignment", `password: "hunter2hunter2"`, "hunter2hunter2"},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "dozjgNryP4J3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Redact(tc.in)
			if strings.Contains(got, tc.mustNotContain) || !strings.Contains(got, redacted) {
				t.Errorf("Redact(%q) = %q, still holds %q", tc.in, got, tc.mustNotContain)
			}
		})
	}
	if in := "Use IHttpClientFactory; see https://learn.microsoft.com/dotnet"; Redact(in) != in {
		t.Errorf("Redact changed ordinary text: %q", Redact(in))
	}
}

func TestPreview(t *testing.T) {
	long := strings.Repeat("é", 600)
	got := Preview(long, MaxPreviewChars)
	if n := len([]rune(got)); n != MaxPreviewChars || !strings.HasSuffix(got, "…") {
		t.Errorf("preview has %d runes (suffix %q), want %d ending with …", n, got[len(got)-3:], MaxPreviewChars)
	}
	if got := Preview("short", MaxPreviewChars); got != "short" {
		t.Errorf("Preview(short) = %q", got)
	}
	// A secret straddling the cut is redacted before cutting.
	s := strings.Repeat("x", 490) + " sk-abcdefghijklmnopqrstuvwxyz"
	if got := Preview(s, MaxPreviewChars); strings.Contains(got, "sk-abc") {
		t.Errorf("a secret at the cut leaked: %q", got[480:])
	}
}

func TestBoundArguments(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "null"},
		{"plain", `{"query":"x"}`, `{"query":"x"}`},
		{"secret redacted, still JSON", `{"query":"sk-abcdefghijklmnopqrstuvwxyz"}`, `{"query":"[REDACTED]"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(boundArguments(json.RawMessage(tc.in))); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	huge := boundArguments(json.RawMessage(`{"q":"` + strings.Repeat("a", maxArgumentBytes) + `"}`))
	if !json.Valid(huge) || len(huge) > 2*MaxPreviewChars+100 || !strings.Contains(string(huge), `"_unparsed_or_truncated":true`) {
		t.Errorf("huge arguments not bounded: %d bytes", len(huge))
	}
	if bad := boundArguments(json.RawMessage(`{"q":`)); !json.Valid(bad) {
		t.Errorf("invalid arguments produced invalid JSON: %s", bad)
	}
}

func TestTraceIDFromHeader(t *testing.T) {
	tests := []struct{ in, want string }{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "0af7651916cd43dd8448eb211c80319c"},
		{" 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00 ", "0af7651916cd43dd8448eb211c80319c"},
		{"", ""},
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", ""}, // upper case
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", ""}, // zero trace
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", ""}, // zero span
		{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", ""}, // forbidden version
		{"00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01", ""},   // short
		{"00-0af7651916cd43dd8448eb211c80319c\r\nX-Evil: 1-b7ad6b7169203331-01", ""},
	}
	for _, tc := range tests {
		if got := traceIDFromHeader(tc.in); got != tc.want {
			t.Errorf("traceIDFromHeader(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	id := newTraceID()
	if traceIDFromHeader(traceparent(id)) != id {
		t.Errorf("traceparent(%s) = %q does not round-trip", id, traceparent(id))
	}
}

func TestCheckFetchURL(t *testing.T) {
	tests := []struct{ url, wantErr string }{
		{"https://learn.microsoft.com/dotnet/api/system.net.http.httpclient", ""},
		{"https://LEARN.microsoft.com./dotnet", ""},
		{"https://learn.microsoft.com:443/x", ""},
		{"http://learn.microsoft.com/x", "only https"},
		{"https://learn.microsoft.com.attacker.example/x", "only pages on learn.microsoft.com"},
		{"https://attacker.example/?u=https://learn.microsoft.com/", "only pages on learn.microsoft.com"},
		{"https://user:pw@learn.microsoft.com/x", "credentials"},
		{"https://learn.microsoft.com:8443/x", "default https port"},
		{"file:///etc/passwd", "only https"},
		{"", "not a valid absolute URL"},
		{"https://%zz", "not a valid absolute URL"},
	}
	for _, tc := range tests {
		err := checkFetchURL(tc.url, "learn.microsoft.com")
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("checkFetchURL(%q) = %v, want error containing %q", tc.url, err, tc.wantErr)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"relative upstream", Config{UpstreamURL: "/mcp"}, "want an absolute http(s) URL"},
		{"ftp upstream", Config{UpstreamURL: "ftp://learn.microsoft.com/api/mcp"}, "want an absolute http(s) URL"},
		{"negative timeout", Config{UpstreamTimeout: -1}, "must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	sc, err := New(Config{})
	if err != nil || sc.docsHost != "learn.microsoft.com" || sc.cfg.UpstreamTimeout != DefaultUpstreamTimeout {
		t.Errorf("defaults: %v, docs host %q, timeout %s", err, sc.docsHost, sc.cfg.UpstreamTimeout)
	}
}
