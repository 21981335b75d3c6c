//go:build linux

package roles

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// probeOptions are the flags of `mcpsidecar probe`.
type probeOptions struct {
	out               string
	serializeEvidence bool
	verbose           bool
	unhardened        bool
	childSleep        time.Duration
}

// probeLong is the probe's help.
const probeLong = `probe measures the sandbox it runs in and writes report.json, status.ndjson
(live progress) and done.json into --out. Each probe records what the shell,
the in-process tool path and alternate bypasses yielded (Allowed, Denied,
Error, N/A), what the spec expects, and a verdict: pass, violation or
unsupported.

It refuses to run outside the sandbox (SANDBOX_AGENT_CONTAINER=1 and the
output directory present), and applies $MCPSIDECAR_HARDEN_POLICY first, as the
agent does. The spec's expectations come from $` + probe.ContextEnv + ` (JSON;
empty means the default spec).

--unhardened skips the policy: it measures a container as it is, to show
that each probe can report a violation.`

func probeCmd(ctx context.Context, args []string, s Streams) error {
	var o probeOptions
	f := newFlags("probe [flags]", probeLong, s)
	f.StringVar(&o.out, "out", agent.DefaultOutputDir, "directory for report.json, status.ndjson and done.json")
	f.BoolVar(&o.serializeEvidence, "serialize-evidence", false, "keep each probe's evidence in report.json (secrets are always redacted)")
	f.BoolVar(&o.verbose, "verbose", false, "print every probe's outcome and verdict")
	f.BoolVar(&o.unhardened, "unhardened", false, "do not apply $MCPSIDECAR_HARDEN_POLICY (to show that probes can fail)")
	f.DurationVar(&o.childSleep, probe.ChildSleepFlag, 0, "sleep and exit: the child the process-control probes start (internal)")
	if err := f.noArgs(args); err != nil {
		return err
	}
	return runProbe(ctx, o, s, os.Getenv)
}

func runProbe(ctx context.Context, o probeOptions, s Streams, getenv func(string) string) error {
	if o.childSleep > 0 {
		// A child of the suite: it inherits the sandbox's restrictions.
		select {
		case <-time.After(o.childSleep):
		case <-ctx.Done():
		}
		return nil
	}
	if getenv(agent.EnvInSandbox) != "1" { // name this role, not the agent
		return withHint(exitUsage, fmt.Errorf("mcpsidecar probe runs only inside the sandbox container (%s is not 1)", agent.EnvInSandbox),
			"on the host use: mcpsidecar test-sandbox")
	}
	if err := agent.CheckSandbox(getenv, o.out); err != nil {
		return withHint(exitUsage, err, "run the probe suite through: mcpsidecar test-sandbox")
	}
	pc, err := probe.ParseContext([]byte(getenv(probe.ContextEnv)))
	if err != nil {
		return withCode(exitUsage, err)
	}
	rep, err := probe.Serve(ctx, pc, probe.Options{OutDir: o.out, SerializeEvidence: o.serializeEvidence, Progress: s.Out}, func() error {
		if o.unhardened {
			return holdRole(ctx)
		}
		return hardenRole(ctx, "probe", getenv, s.Err, true, o.out)
	})
	if err != nil {
		return err
	}
	if o.verbose {
		if err := rep.WriteTable(s.Out); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(s.Out, rep.Summary())
	}
	fmt.Fprintf(s.Out, "Sandbox Tester report saved to: %s\n", filepath.Join(o.out, runs.FileProbeReport))
	return nil
}
