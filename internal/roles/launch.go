//go:build linux

package roles

import (
	"context"
	"errors"
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
)

// launchCmd is the hidden role a user's workload container runs as its
// entrypoint: `mcpsidecar launch -- CMD ARGS...` applies the workload's
// hardening (package launcher) and executes CMD. Everything after the
// command name is the workload's, flags included.
func launchCmd(ctx context.Context, args []string, s Streams) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return usageErrorf("launch: no command: mcpsidecar launch -- CMD [ARGS...]")
	}
	err := launcher.Launch(launcher.Options{Context: ctx, Argv: args, Environ: os.Environ(), Stderr: s.Err,
		ReportDir: os.Getenv(envLaunchReportDir)})
	var ee *launcher.ExitError
	if errors.As(err, &ee) {
		if ee.Err == nil {
			return withCode(ee.Code, err)
		}
		return withCode(ee.Code, ee.Err)
	}
	return err
}

// envLaunchReportDir is where the launcher writes harden-report.json (the
// workload's output directory; unset: no report).
const envLaunchReportDir = launcher.EnvReportDir
