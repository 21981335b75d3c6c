package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
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
