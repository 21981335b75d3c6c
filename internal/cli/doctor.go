package cli

import (
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/spf13/cobra"
)

func newDoctorCmd(s Streams) *cobra.Command {
	return newSandboxCmd(s, sandboxCommand{
		name: "doctor", workload: orchestrate.WorkloadCheck,
		short: "Check that the sandbox works, end to end, without a model or an API key",
		long: `doctor runs the preflight (Docker daemon, engine version) and then one full
sandbox lifecycle — image, networks, gateway, sidecar, agent container, artifacts,
teardown — in which the agent container runs a built-in connectivity check
("mcpsidecar agent --check") instead of a model: it lists the sidecar's tools,
reads the answer-format resource, confirms the gateway refuses a name under
.invalid, that its credential listener refuses a model request without the
run's placeholder (and with a wrong one), and that the container has no route
out, and prints a table. The host then checks that the gateway recorded those
refusals and that no file of the run holds the key the gateway held.

No API key is needed and no traffic leaves the machine. Run it before spending
money on a model. The record lands in a run directory like any run's.`,
		args:    cobra.NoArgs,
		timeout: 2 * time.Minute,
	})
}
