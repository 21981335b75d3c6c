package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestSandboxCommandsBadInput: every malformed input stops before anything
// is created, with the exit code the table promises. None needs Docker:
// the spec is checked first, and DOCKER_HOST points nowhere.
func TestSandboxCommandsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("schema_version = 2\ncapabilities = [\"teleport\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	runsDir := filepath.Join(dir, "runs")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"invalid spec", []string{"run", "--spec", bad, "--runs-dir", runsDir}, ExitInvalidSpec, "bad.toml:1"},
		{"missing spec", []string{"doctor", "--spec", filepath.Join(dir, "nope.toml"), "--runs-dir", runsDir}, ExitInvalidSpec, "does not exist"},
		{"zero timeout", []string{"run", "--timeout", "0s"}, ExitUsage, "--timeout 0s"},
		{"bad ready timeout", []string{"doctor", "--ready-timeout", "-1s"}, ExitUsage, "--ready-timeout"},
		{"bad timeout syntax", []string{"test-sandbox", "--timeout", "soon"}, ExitUsage, "invalid argument"},
		{"missing baseline", []string{"test-sandbox", "--baseline", filepath.Join(dir, "none.json")}, ExitUsage, "--baseline"},
		{"no daemon", []string{"doctor", "--runs-dir", runsDir}, ExitUnavailable, "docker"},
		{"runs show unknown", []string{"runs", "show", "run-1999", "--runs-dir", runsDir}, ExitUsage, `run "run-1999": not found`},
		{"runs show args", []string{"runs", "show", "a", "b"}, ExitUsage, "accepts at most 1 arg"},
		{"gc no daemon", []string{"gc"}, ExitUnavailable, "docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("code %d, stderr %q; want %d and %q", code, stderr, tt.wantCode, tt.wantErr)
			}
			if _, err := os.Stat(runsDir); err == nil {
				t.Errorf("a runs directory was created")
			}
		})
	}
}

func TestCheckEngine(t *testing.T) {
	tests := []struct {
		version  string
		allowOld bool
		wantCode int // 0: accepted
		degraded bool
	}{
		{"27.3.1", false, 0, false},
		{"26.0.0", false, 0, false},
		{"20.10.24+dfsg1", false, ExitUnavailable, false},
		{"20.10.24+dfsg1", true, 0, true},
		{"garbage", true, ExitUnavailable, false},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			var errb bytes.Buffer
			j := &job{s: Streams{Err: &errb}, o: sandboxOptions{allowOldEngine: tt.allowOld}}
			err := j.checkEngine(dockerx.EngineVersion{Version: tt.version})
			if code := exitCodeOf(err); code != tt.wantCode {
				t.Fatalf("exit code %d (%v), want %d", code, err, tt.wantCode)
			}
			if got := len(j.meta.Degradations) == 1; got != tt.degraded {
				t.Errorf("degradations %v, want degraded=%v", j.meta.Degradations, tt.degraded)
			}
			if tt.degraded && !strings.Contains(errb.String(), "warning: Docker Engine") {
				t.Errorf("the degradation was not printed: %q", errb.String())
			}
		})
	}
}

func TestExtraLabels(t *testing.T) {
	got, err := extraLabels("mcpsidecar.test=1,mcpsidecar.e2e=abc,empty=")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"mcpsidecar.test": "1", "mcpsidecar.e2e": "abc", "empty": ""}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"novalue", "=v", "a=1,,b=2"} {
		if _, err := extraLabels(bad); err == nil || !strings.Contains(err.Error(), envExtraLabels) {
			t.Errorf("%q: got %v, want an error naming %s", bad, err, envExtraLabels)
		}
	}
}

func TestParseCheckTable(t *testing.T) {
	out := "CHECK                     RESULT  DETAIL\n" +
		"sidecar tools             ok      4 tools: a, b\n" +
		"no route out              FAIL    default route via eth0\n" +
		"some other line\n"
	want := []runs.Check{{Name: "sidecar tools", OK: true, Detail: "4 tools: a, b"}, {Name: "no route out", Detail: "default route via eth0"}}
	if diff := cmp.Diff(want, parseCheckTable(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCheckVerdictDegradesOnlyTheRoute(t *testing.T) {
	tests := []struct {
		name     string
		table    string
		allowOld bool
		wantOK   bool
	}{
		{"route only, old engine accepted", "no route out  FAIL  default route via eth0\nsidecar tools  ok  4\n", true, true},
		{"route only, not accepted", "no route out  FAIL  default route via eth0\n", false, false},
		{"another failure", "no route out  FAIL  x\ngateway refuses .invalid  FAIL  answered 200\n", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exit := 1
			j := &job{s: Streams{Err: &bytes.Buffer{}}, o: sandboxOptions{allowOldEngine: tt.allowOld}, agentExit: &exit}
			j.meta.Engine.Version = "20.10.24"
			j.stdout.Write([]byte(tt.table))
			ok := true
			for _, c := range j.checkVerdict() {
				ok = ok && c.OK
			}
			if ok != tt.wantOK {
				t.Errorf("verdict ok %v, want %v", ok, tt.wantOK)
			}
		})
	}
}

func TestCapBufferAndRedact(t *testing.T) {
	j := &job{secrets: []string{"sk-live-123456"}}
	var b capBuffer
	b.Write([]byte("key=sk-live-123456\n"))
	if got := string(j.redact(b.Bytes())); got != "key="+dockerx.Redacted+"\n" {
		t.Errorf("redacted %q", got)
	}
	big := make([]byte, maxCapture+10)
	var c capBuffer
	c.Write(big)
	if got := c.Bytes(); len(got) <= maxCapture || !bytes.Contains(got, []byte("10 more bytes not kept")) {
		t.Errorf("cap: len %d, tail %q", len(got), got[len(got)-40:])
	}
}

func TestInterruptedIs130(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := exitCodeOf(interrupted(ctx, nil)); code != exitInterrupted {
		t.Errorf("code %d, want %d", code, exitInterrupted)
	}
	if err := interrupted(context.Background(), nil); err != nil {
		t.Errorf("not interrupted: got %v", err)
	}
}
