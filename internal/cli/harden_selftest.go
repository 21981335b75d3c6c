//go:build testcommands

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

// envSelftestChecks carries the harden-selftest checks (JSON list of
// harden.Check) when --checks is absent.
const envSelftestChecks = "MCPSIDECAR_SELFTEST_CHECKS"

// selftestOptions are the flags of the hidden harden-selftest command.
type selftestOptions struct {
	checks    string
	reportDir string
	outerOnly bool
}

// selftestOutput is what harden-selftest prints.
type selftestOutput struct {
	Report  harden.Report        `json:"report"`
	Results []harden.CheckResult `json:"results"`
}

// newHardenSelftestCmd is a hidden command for the e2e tests: it applies
// the policy from the environment, as a role would, then attempts each
// check and prints the report and the results as JSON.
func newHardenSelftestCmd(s Streams) *cobra.Command {
	var o selftestOptions
	cmd := &cobra.Command{
		Use:    "harden-selftest",
		Short:  "Apply $MCPSIDECAR_HARDEN_POLICY, then attempt forbidden and allowed actions (for tests)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHardenSelftest(o, s, os.Getenv)
		},
	}
	cmd.Flags().StringVar(&o.checks, "checks", "", "JSON list of checks {name, action, arg, want} (default: $"+envSelftestChecks+", else a built-in list)")
	cmd.Flags().StringVar(&o.reportDir, "report-dir", "", "write "+harden.ReportFile+" here")
	cmd.Flags().BoolVar(&o.outerOnly, "outer-only", false, "apply nothing: measure only the container's own layers (Docker's seccomp profile, capabilities)")
	return cmd
}

func runHardenSelftest(o selftestOptions, s Streams, getenv func(string) string) error {
	checks, err := selftestChecks(o.checks, getenv)
	if err != nil {
		return err
	}
	if o.outerOnly {
		return printSelftest(s.Out, selftestOutput{Results: harden.RunChecks(checks)})
	}
	p, ok, err := harden.PolicyFromEnv(getenv)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if !ok {
		return usageErrorf("%s is not set: the self-test hardens itself first", harden.EnvPolicy)
	}
	var out selftestOutput
	out.Report, err = harden.Apply(*p)
	if o.reportDir != "" {
		if werr := harden.WriteReport(o.reportDir, out.Report); werr != nil {
			return werr
		}
	}
	var ue *harden.UnavailableError
	if errors.As(err, &ue) {
		return withCode(ExitUnavailable, err)
	}
	if err != nil {
		return err
	}
	out.Results = harden.RunChecks(checks)
	return printSelftest(s.Out, out)
}

func printSelftest(w io.Writer, out selftestOutput) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	return selftestVerdict(out.Results)
}

func selftestChecks(flag string, getenv func(string) string) ([]harden.Check, error) {
	raw := flag
	if raw == "" {
		raw = getenv(envSelftestChecks)
	}
	if raw == "" {
		return defaultSelftestChecks(), nil
	}
	var checks []harden.Check
	if err := json.Unmarshal([]byte(raw), &checks); err != nil {
		return nil, usageErrorf("decoding --checks: %v", err)
	}
	return checks, nil
}

// defaultSelftestChecks are what any hardened role must refuse.
func defaultSelftestChecks() []harden.Check {
	var checks []harden.Check
	for _, a := range []string{harden.ActPtrace, harden.ActUnshareUser, harden.ActMount, harden.ActKeyctl, harden.ActIOUring} {
		checks = append(checks, harden.Check{Name: a, Action: a, Want: harden.OutcomeDenied})
	}
	return checks
}

// selftestVerdict is exit code 4 when any check did not go as wanted.
func selftestVerdict(results []harden.CheckResult) error {
	var failed []string
	for _, r := range results {
		if !r.Pass {
			failed = append(failed, fmt.Sprintf("%s (got %s, want %s)", r.Name, r.Got, r.Want))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return withCode(ExitViolation, fmt.Errorf("harden self-test: %d check(s) failed: %s", len(failed), strings.Join(failed, "; ")))
}
