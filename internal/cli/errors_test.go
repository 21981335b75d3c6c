package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestProbeOnHostNamesItself: `mcpsidecar probe` run on the host says
// that the probe (not the agent) runs only inside the sandbox.
func TestProbeOnHostNamesItself(t *testing.T) {
	t.Setenv(agent.EnvInSandbox, "")
	code, _, errs := run(t, "probe", "--out", t.TempDir())
	if code != ExitUsage || !strings.Contains(errs, "mcpsidecar probe runs only inside the sandbox") || strings.Contains(errs, "agent runs") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// TestInterruptedWithoutNoise: after Ctrl-C, "context canceled" and what
// failed because of it are not shown; other errors still are.
func TestInterruptedWithoutNoise(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	noisy := errors.Join(fmt.Errorf("agent interrupted: %w", context.Canceled), errors.New("reading report: open /x/report.json: no such file"))
	if got := interrupted(ctx, noisy).Error(); got != "interrupted; sandbox torn down" {
		t.Errorf("interrupted = %q", got)
	}
	if got := interrupted(ctx, errors.New("creating network: address pool exhausted")).Error(); !strings.Contains(got, "address pool exhausted") {
		t.Errorf("a real error was dropped: %q", got)
	}
}

// TestBaselineNamed: --baseline takes what report show takes, and a
// directory without a report is said as such, not "is a directory".
func TestBaselineNamed(t *testing.T) {
	code, _, errs := run(t, "test-sandbox", "--baseline", t.TempDir())
	if code != ExitUsage || !strings.Contains(errs, "has no report.json") || strings.Contains(errs, "is a directory") {
		t.Fatalf("exit %d, stderr %q", code, errs)
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
	j := &job{o: sandboxOptions{workload: orchestrate.WorkloadProbe}, dir: d, agentExit: &killed}
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
