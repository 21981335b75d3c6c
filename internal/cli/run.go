package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/spf13/cobra"
)

// exitInterrupted is the conventional exit status after SIGINT (128+2).
const exitInterrupted = 130

// Environment variables the sandbox commands read on the host.
const (
	envAllowOldEngine = "MCPSIDECAR_ALLOW_OLD_ENGINE" // "1": accept an engine older than 26
	envImageBinary    = "MCPSIDECAR_IMAGE_BINARY"     // the binary to put in the image (default: this one)
	envCABundle       = agent.EnvCABundle             // default /etc/ssl/certs/ca-certificates.crt
	envImageMethod    = "MCPSIDECAR_IMAGE_METHOD"     // "import": skip the classic builder
	envExtraLabels    = "MCPSIDECAR_LABELS"           // "k=v,k=v" added to every resource (tests)
	envSubnetPool     = "MCPSIDECAR_SUBNET_POOL"      // the private IPv4 range the runs' networks come from
)

// sandboxOptions are the flags shared by run, doctor and test-sandbox.
type sandboxOptions struct {
	command        string // "run", "doctor", "test-sandbox"
	workload       orchestrate.Workload
	specFile       string
	runsDir        string
	timeout        time.Duration
	readyTimeout   time.Duration
	keep           bool
	quiet          bool
	json           bool
	question       string
	allowOldEngine bool
	gatewayEngine  string // orchestrate.EngineOurs or EngineSquid
	squidImage     string
	subnetPool     string // CIDR, orchestrate.ParseSubnetPool

	serializeEvidence bool
	baseline          string
	// runDir, when set, receives the run directory's path.
	runDir *string
	// cmdOverride replaces a role's command; hidden flags for tests.
	workloadCmd, gatewayCmd []string
}

func (o *sandboxOptions) addFlags(cmd *cobra.Command, withQuestion bool) {
	f := cmd.Flags()
	f.StringVar(&o.specFile, "spec", "", specFlagHelp)
	f.StringVar(&o.runsDir, "runs-dir", runs.DefaultRunsDir, "directory that holds the run directories")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "kill the workload after this long")
	f.DurationVar(&o.readyTimeout, "ready-timeout", 30*time.Second, "how long the gateway and sidecar may take to become ready")
	f.BoolVar(&o.keep, "keep", false, "keep containers and networks after the run (servers still running; gc leaves them) and print the commands that remove them")
	f.BoolVar(&o.quiet, "quiet", false, "print no progress lines")
	f.BoolVar(&o.json, "json", false, "print a JSON summary on stdout (the workload's stdout goes to stderr)")
	f.BoolVar(&o.allowOldEngine, "allow-old-engine", os.Getenv(envAllowOldEngine) == "1",
		"accept a Docker Engine older than 26 (recorded as a degradation; env "+envAllowOldEngine+"=1)")
	f.StringVar(&o.gatewayEngine, "gateway-engine", orchestrate.EngineOurs,
		"egress gateway: ours (mcpsidecar gateway) or squid (Squid with the generated squid.conf)")
	f.StringVar(&o.squidImage, "squid-image", orchestrate.DefaultSquidImage,
		"Squid image for --gateway-engine squid; must be on the engine (never pulled): scripts/build-squid-image.sh builds "+egress.SquidImage)
	f.StringVar(&o.subnetPool, "subnet-pool", orDefault(os.Getenv(envSubnetPool), orchestrate.DefaultSubnetPool),
		"private IPv4 range (CIDR, /27 or larger) each run's two /28 networks are taken from (env "+envSubnetPool+")")
	f.StringSliceVar(&o.workloadCmd, "x-workload-cmd", nil, "replace the workload container's command (testing)")
	f.StringSliceVar(&o.gatewayCmd, "x-gateway-cmd", nil, "replace the gateway container's command (testing)")
	_ = f.MarkHidden("x-workload-cmd")
	_ = f.MarkHidden("x-gateway-cmd")
	if withQuestion {
		f.StringVar(&o.question, "question", "", "the question for the agent (default: the seed's); any other question is judged by exit 0, an answer saved and printed, and a complete audit, and the model may use any tools or none")
	}
}

func (o sandboxOptions) validate() error {
	switch {
	case o.timeout <= 0:
		return usageErrorf("--timeout %s: want a positive duration", o.timeout)
	case o.readyTimeout <= 0:
		return usageErrorf("--ready-timeout %s: want a positive duration", o.readyTimeout)
	case o.runsDir == "":
		return usageErrorf("--runs-dir: want a directory")
	}
	if _, err := o.pool(); err != nil {
		return err
	}
	return o.validateEngine()
}

func newRunCmd(s Streams) *cobra.Command {
	o := sandboxOptions{command: "run", workload: orchestrate.WorkloadAgent}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent in a hardened, disposable sandbox and keep the record",
		Long: `run builds (or reuses) the FROM-scratch image, creates the run's internal and
egress networks, starts the egress gateway and the MCP sidecar, runs the agent
with its output streamed here, saves every artifact under the run directory, and
removes every container and network it created — on success, failure, timeout
and Ctrl-C alike (a second Ctrl-C forces an exit; "mcpsidecar gc" cleans up).

Phases, each one progress line on stderr: spec, preflight, image, run-dir,
networks, gateway, sidecar, agent, wait, collect, teardown.

Environment: OPENAI_API_KEY (required by openai_agents), OPENAI_BASE_URL (any
OpenAI-compatible /v1 endpoint; its host, with the port when not 80/443, must be
in allowed_domains or allowed_ip_addresses), OPENAI_MODEL, DOCKER_HOST,
` + envAllowOldEngine + `, and
` + envCABundle + `: the PEM bundle of CA certificates the sandbox trusts
(default /etc/ssl/certs/ca-certificates.crt). Set it behind a TLS-inspecting
corporate proxy, or for a model or MCP server signed by a private CA, when an
error says "certificate signed by unknown authority".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runSandbox(cmd.Context(), s, o)
		},
	}
	o.addFlags(cmd, true)
	return cmd
}

// interrupted turns the end of a run cancelled by a signal into exit 130.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if err == nil || errors.Is(err, context.Canceled) {
		// What failed after Ctrl-C failed because of it ("context
		// canceled", a report never written): no news to the user.
		return withCode(exitInterrupted, errors.New("interrupted; sandbox torn down"))
	}
	return withCode(exitInterrupted, fmt.Errorf("interrupted; sandbox torn down: %w", err))
}

// extraLabels parses MCPSIDECAR_LABELS ("k=v,k=v").
func extraLabels(raw string) (map[string]string, error) {
	out := map[string]string{}
	if raw == "" {
		return out, nil
	}
	for _, kv := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("%s: entry %q: want key=value", envExtraLabels, kv)
		}
		out[k] = v
	}
	return out, nil
}

// engineMajor reads the major version of an engine version string such as
// "20.10.24+dfsg1" or "27.3.1".
func engineMajor(v string) (int, error) {
	head, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(head)
	if err != nil {
		return 0, fmt.Errorf("reading engine version %q: %w", v, err)
	}
	return n, nil
}

// pool is --subnet-pool (or MCPSIDECAR_SUBNET_POOL), checked.
func (o sandboxOptions) pool() (netip.Prefix, error) {
	p, err := orchestrate.ParseSubnetPool(o.subnetPool)
	if err != nil {
		return netip.Prefix{}, usageErrorf("--subnet-pool (env %s): %v", envSubnetPool, err)
	}
	return p, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
