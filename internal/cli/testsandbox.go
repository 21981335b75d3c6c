package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/spf13/cobra"
)

func newTestSandboxCmd(s Streams) *cobra.Command {
	return newSandboxCmd(s, sandboxCommand{
		name: "test-sandbox", workload: orchestrate.WorkloadProbe,
		short: "Measure the sandbox from inside with the probe suite; exit 4 on a violation",
		long: `test-sandbox creates the same sandbox as run, but the agent container runs the
probe suite ("mcpsidecar probe") with the agent's hardening. The suite writes
report.json, status.ndjson and done.json, collected into the run directory.
Exit code 4 when any probe's verdict is "violation".

--baseline RUN|FILE compares the new report with an earlier one (a report.json,
a run directory or a run id) and lists every probe whose verdict changed.`,
		args:        cobra.NoArgs,
		ownWorkload: true, // --image: the probe suite in the user's image, under the launcher
		timeout:     10 * time.Minute,
		flags: func(cmd *cobra.Command, o *sandboxOptions) {
			f := cmd.Flags()
			f.BoolVar(&o.serializeEvidence, "serialize-evidence", false, "keep each probe's raw evidence in report.json (default: removed)")
			f.StringVar(&o.baseline, "baseline", "", "an earlier report to compare the new one with: a report.json, a run directory or a run id")
		},
		before: func(s Streams, o *sandboxOptions) error {
			if o.own.image != "" {
				fmt.Fprintf(s.Err, "measuring the sandbox of workload image %s\n", o.own.image)
			}
			return o.findBaseline()
		},
		after: func(ctx context.Context, s Streams, o sandboxOptions, res sandbox.Result) {
			if o.baseline != "" && res.RunDir != "" && ctx.Err() == nil {
				compareBaseline(s, o.baseline, res.RunDir)
			}
		},
	})
}

// findBaseline checks --baseline and names its report.json.
func (o *sandboxOptions) findBaseline() error {
	if o.baseline == "" {
		return nil
	}
	path, err := reportPath(o.runsDir, o.baseline)
	if err == nil {
		_, err = loadReportArg(o.runsDir, path)
	}
	if err != nil {
		return usageErrorf("--baseline: %v", err)
	}
	o.baseline = path
	return nil
}

// compareBaseline prints every probe whose verdict differs from the
// baseline's.
func compareBaseline(s Streams, baseline, runDir string) {
	base, err := probe.LoadReport(baseline)
	if err != nil {
		return
	}
	cur, err := probe.LoadReport(filepath.Join(runDir, runs.FileProbeReport))
	if err != nil {
		return
	}
	changed := 0
	for _, g := range cur.Groups {
		for _, c := range g.Capabilities {
			old := base.Find(g.ID, c.ID)
			was := "absent"
			if old != nil {
				was = string(old.Verdict)
			}
			if was != string(c.Verdict) {
				changed++
				fmt.Fprintf(s.Err, "baseline: %s/%s %s -> %s\n", g.ID, c.ID, was, c.Verdict)
			}
		}
	}
	fmt.Fprintf(s.Err, "baseline: %d probe verdict(s) changed since %s\n", changed, baseline)
}
