package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

func TestCheckEngine(t *testing.T) {
	tests := []struct {
		version  string
		allowOld bool
		wantCode int // 0: accepted
		degraded bool
	}{
		{"27.3.1", false, 0, false},
		{"26.0.0", false, 0, false},
		{"20.10.24+dfsg1", false, exitcode.Unavailable, false},
		{"20.10.24+dfsg1", true, 0, true},
		{"garbage", true, exitcode.Unavailable, false},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			var errb bytes.Buffer
			j := &job{s: Output{Err: &errb}, o: Options{AllowOldEngine: tt.allowOld}}
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
		if _, err := extraLabels(bad); err == nil || !strings.Contains(err.Error(), EnvExtraLabels) {
			t.Errorf("%q: got %v, want an error naming %s", bad, err, EnvExtraLabels)
		}
	}
}

func TestCapBufferAndRedact(t *testing.T) {
	j := &job{secrets: []string{"sk-live-123456"}}
	var b Capture
	b.Write([]byte("key=sk-live-123456\n"))
	if got := string(j.redact(b.Bytes())); got != "key="+dockerx.Redacted+"\n" {
		t.Errorf("redacted %q", got)
	}
	big := make([]byte, maxCapture+10)
	var c Capture
	c.Write(big)
	if got := c.Bytes(); len(got) <= maxCapture || !bytes.Contains(got, []byte("10 more bytes not kept")) {
		t.Errorf("cap: len %d, tail %q", len(got), got[len(got)-40:])
	}
}

// TestNoReportNoiseAfterTimeout: a test-sandbox run cut short (timeout,
// Ctrl-C) fails with its own error only, not a follow-on "reading
// report" one; the check still records that no report was written.
func TestNoReportNoiseAfterTimeout(t *testing.T) {
	d, err := runs.Create(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	killed := 137
	j := &job{o: Options{Workload: orchestrate.WorkloadProbe}, dir: d, agentExit: &killed, backend: sessionBackend{}}
	if err := j.verdict(errors.New("agent still running after the 1s timeout; killed")); err != nil {
		t.Errorf("verdict added %v", err)
	}
	c := j.meta.Verdict.Checks
	if len(c) == 0 || c[0].OK || !strings.Contains(c[0].Detail, "wrote no report") || strings.Contains(c[0].Detail, "open ") {
		t.Errorf("checks %+v", c)
	}
	if err := j.verdict(nil); err == nil || !strings.Contains(err.Error(), "wrote no report") {
		t.Errorf("without a run error, a missing report is the error: %v", err)
	}
}

func TestAddressHint(t *testing.T) {
	tests := []struct {
		err      error
		wantCode int
		wantHint string
	}{
		{fmt.Errorf("creating network n: %w: every /28 of 10.213.0.0/16 is taken", orchestrate.ErrSubnetPoolExhausted),
			exitcode.Unavailable, "--subnet-pool or " + EnvSubnetPool},
		{fmt.Errorf("creating network n: %w", dockerx.ErrNoAddressPool), exitcode.Unavailable, "default-address-pools"},
		{errors.New("creating network n: permission denied"), exitcode.Runtime, ""},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			code, hint := exitcode.Of(addressHint(tt.err))
			if code != tt.wantCode || !strings.Contains(hint, tt.wantHint) {
				t.Errorf("got %d %q, want %d and a hint with %q", code, hint, tt.wantCode, tt.wantHint)
			}
		})
	}
}
