package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/redact"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// TestLiveRedaction: what the live export sends has the run's secrets
// removed, whatever their variable's name (a credential from GITHUB_PAT,
// which hostSecrets alone does not take for a secret), and this host's
// secret-named values too.
func TestLiveRedaction(t *testing.T) {
	run := sandbox.Redactor(func(b []byte) []byte { return redact.Values(b, []string{"ghp_runcredential"}, "<redacted>") })
	r := liveRedaction(run, []string{"GITHUB_PAT=ghp_runcredential", "MY_API_KEY=hostsecretvalue", "PATH=/bin"})
	got := string(r([]byte(`{"token":"ghp_runcredential","key":"hostsecretvalue","path":"/bin"}`)))
	if strings.Contains(got, "ghp_runcredential") || strings.Contains(got, "hostsecretvalue") || !strings.Contains(got, "/bin") {
		t.Errorf("redacted: %s", got)
	}
	if got := string(liveRedaction(nil, nil)([]byte("plain"))); got != "plain" {
		t.Errorf("no secrets: %q", got)
	}
}

// TestProgressStreamsRedacted: the progress streams pass writes through
// until the run's redaction is known, then remove its secrets.
func TestProgressStreamsRedacted(t *testing.T) {
	var buf bytes.Buffer
	rw := &redactingWriters{}
	w := rw.wrap(&buf)
	if _, err := w.Write([]byte("[phase] spec\n")); err != nil {
		t.Fatal(err)
	}
	rw.set(func(b []byte) []byte { return redact.Values(b, []string{"s3cr3t-value"}, "<redacted>") })
	if n, err := w.Write([]byte("[tool] refused: s3cr3t-value\n")); err != nil || n != len("[tool] refused: s3cr3t-value\n") {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if got := buf.String(); got != "[phase] spec\n[tool] refused: <redacted>\n" {
		t.Errorf("streams: %q", got)
	}
}
