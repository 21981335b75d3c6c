package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestRunsTailPicksTheRunningRun: without RUN, the newest run that has
// not ended; --follow prints what its gateway appends and ends, with the
// exit code, once the harness writes timeline.jsonl.
func TestRunsTailPicksTheRunningRun(t *testing.T) {
	dir := t.TempDir()
	running := filepath.Join(dir, "run-2026-12-07-00-00-02")
	ended := filepath.Join(dir, "run-2026-12-07-00-00-01")
	for _, p := range []string{filepath.Join(running, "gateway"), ended} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ended, runs.FileTimeline), "")
	write(filepath.Join(running, runs.FileGatewayPolicy), `{"allowed_domains":[".microsoft.com"]}`)
	write(filepath.Join(running, "gateway", runs.FileDecisions),
		`{"time":"2026-12-07T00:00:03Z","method":"CONNECT","host":"exfil.example","port":443,"decision":"deny","reason":"host exfil.example is not in allowed_domains"}`+"\n")
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runsTail(context.Background(), Streams{Out: &out, Err: &errb}, tailOptions{dir: dir, follow: true, interval: 10 * time.Millisecond})
	}()
	time.Sleep(100 * time.Millisecond)
	write(filepath.Join(running, runs.MetadataFile), `{"run_id":"run-2026-12-07-00-00-02","exit_code":3,"verdict":{"ok":false,"checks":[{"name":"egress","ok":false}]}}`)
	write(filepath.Join(running, runs.FileTimeline), "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("runs tail -f did not end with the run")
	}
	got := out.String()
	for _, want := range []string{"DENY CONNECT exfil.example:443", `allowed_domains = [".microsoft.com", "exfil.example"]`, "run ended: exit code 3, verdict failed (egress)"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// TestHostSecretsRedactsLiveLines: a running run's log lines lose the
// values of the tail's secret-named variables and URL passwords, as the
// harness's copies do, and keep everything else.
func TestHostSecretsRedactsLiveLines(t *testing.T) {
	red := hostSecrets([]string{"OPENAI_API_KEY=sk-live-0123456789abcdef", "PATH=/usr/bin", "PROXY=http://u:hunter2pass@proxy.test:3128"})
	got := string(red([]byte(`{"host":"api.openai.com","reason":"saw sk-live-0123456789abcdef and hunter2pass in /usr/bin"}`)))
	if strings.Contains(got, "sk-live-0123456789abcdef") || strings.Contains(got, "hunter2pass") || !strings.Contains(got, "/usr/bin") {
		t.Errorf("redacted line: %s", got)
	}
	if hostSecrets([]string{"PATH=/usr/bin"}) != nil {
		t.Error("no secret in the environment, yet a redactor")
	}
}
