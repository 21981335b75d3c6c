package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	kubebackend "github.com/mcpsidecar/mcpsidecar/internal/kube/backend"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// exitInterrupted is the conventional exit status after SIGINT (128+2).
const exitInterrupted = exitcode.Interrupted

// Environment variables the sandbox commands read on the host
// (internal/sandbox owns them).
const (
	envAllowOldEngine = sandbox.EnvAllowOldEngine // "1": accept an engine older than 26
	envCABundle       = sandbox.EnvCABundle       // default: the host's store (hostca)
	envExtraLabels    = sandbox.EnvExtraLabels    // "k=v,k=v" added to every resource (tests)
	envSubnetPool     = sandbox.EnvSubnetPool     // the private IPv4 range the runs' networks come from
)

// sandboxOptions are the flags shared by run, doctor and test-sandbox.
type sandboxOptions struct {
	command        string // "run", "doctor", "test-sandbox"
	workload       orchestrate.Workload
	progress       bool // sandboxCommand.progress
	ledger         bool // sandboxCommand.ledger
	specFile       string
	trustSpec      bool // --trust-spec (spec_gate.go)
	runsDir        string
	timeout        time.Duration
	readyTimeout   time.Duration
	keep           bool
	quiet          bool
	otlp           otlpFlags // otlp.go: the trace sent at the end
	json           bool
	question       string
	events         string // run --events FILE|- (progress.go)
	allowOldEngine bool
	gatewayEngine  string // orchestrate.EngineOurs or EngineSquid
	squidImage     string
	subnetPool     string        // CIDR, orchestrate.ParseSubnetPool
	own            workloadFlags // --image, --pull, -- CMD (run_workload.go)

	serializeEvidence bool
	baseline          string
	// workloadCmd and gatewayCmd replace a role's command; set only by the
	// test binary's hidden flags (testcommands.go).
	workloadCmd, gatewayCmd []string
	kube                    *kubebackend.Config // --backend kubernetes (backend.go); nil: Docker
}

// options turns the checked flags into the lifecycle's options.
func (o sandboxOptions) options() (sandbox.Options, error) {
	pool, err := o.pool()
	if err != nil {
		return sandbox.Options{}, err
	}
	return sandbox.Options{
		Command: o.command, Workload: o.workload,
		RunsDir: o.runsDir, Timeout: o.timeout, ReadyTimeout: o.readyTimeout, Keep: o.keep, Quiet: o.quiet,
		Question: o.question, AllowOldEngine: o.allowOldEngine, GatewayEngine: o.gatewayEngine, SquidImage: o.squidImage,
		SubnetPool: pool, SerializeEvidence: o.serializeEvidence, WorkloadCmd: o.workloadCmd, GatewayCmd: o.gatewayCmd,
		Own: o.own.options(), Backend: o.backend(),
	}, nil
}

// runSandbox runs one lifecycle (internal/sandbox) on the engine DOCKER_HOST
// names, prints where its record is (or, with --json, the summary), and
// maps an interrupted run to exit 130.
func runSandbox(ctx context.Context, s Streams, o sandboxOptions) (sandbox.Result, error) {
	so, err := o.options()
	if err != nil {
		return sandbox.Result{}, err
	}
	chosen, err := gateSpec(s.Err, o.gate(os.Getenv)) // spec_gate.go: an untrusted spec from the working directory stops here
	if err != nil {
		return sandbox.Result{}, err
	}
	so.Spec = chosen.input() // the bytes the gate checked, not a second read
	var eng dockerx.Engine
	if c, err := dockerx.New(); err != nil {
		eng = sandbox.Unavailable(err)
	} else {
		defer c.Close()
		eng = c
	}
	out := sandbox.Output{Out: s.Out, Err: s.Err}
	if o.json {
		out.Out = s.Err // stdout carries the JSON summary
	}
	endProgress, err := o.watchProgress(&so, s, &out) // progress.go
	if err != nil {
		return sandbox.Result{}, err
	}
	live := hookLiveExport(&so, o.otlp, s.Err) // otlp_live.go: spans sent as the run goes
	res, err := sandbox.Run(ctx, eng, so, out)
	_ = endProgress() // a failed stream is a warning, not the run's failure
	if res.RunDir != "" {
		exportAfterRun(ctx, s.Err, o.otlp, res.RunDir, o.quiet, live) // otlp.go: bounded, never the run's failure
		summary(s, o, res, err)
	}
	return res, interrupted(ctx, err)
}

// summary prints where the record is, and with --json a machine summary.
func summary(s Streams, o sandboxOptions, res sandbox.Result, err error) {
	if o.json {
		m := res.Metadata
		out := map[string]any{"run_id": res.RunID, "run_dir": res.RunDir, "exit_code": m.ExitCode,
			"verdict": m.Verdict, "phases": m.Phases, "image": m.Image, "degradations": m.Degradations}
		if err != nil {
			out["error"] = err.Error()
		}
		_ = writeJSONDoc(s.Out, runSummarySchema, out) // jsondoc.go
		return
	}
	fmt.Fprintf(s.Err, "run results saved to: %s\n", res.RunDir)
}

// squid reports whether the gateway engine is Squid.
func (o sandboxOptions) squid() bool { return o.gatewayEngine == orchestrate.EngineSquid }

func (o sandboxOptions) validateEngine() error {
	switch o.gatewayEngine {
	case orchestrate.EngineOurs, orchestrate.EngineSquid:
	default:
		return usageErrorf("--gateway-engine %q: want %s or %s", o.gatewayEngine, orchestrate.EngineOurs, orchestrate.EngineSquid)
	}
	if o.squid() && o.squidImage == "" {
		return usageErrorf("--squid-image: want an image name")
	}
	return nil
}

// addFlags adds the flags run, doctor and test-sandbox share; timeout is
// --timeout's default.
func (o *sandboxOptions) addFlags(cmd *cobra.Command, timeout time.Duration) {
	f := cmd.Flags()
	f.StringVar(&o.specFile, "spec", "", specFlagHelp)
	f.BoolVar(&o.trustSpec, "trust-spec", false, trustFlagHelp)
	f.StringVar(&o.runsDir, "runs-dir", runs.DefaultRunsDir, "directory that holds the run directories")
	f.DurationVar(&o.timeout, "timeout", timeout, "kill the workload after this long")
	f.DurationVar(&o.readyTimeout, "ready-timeout", 30*time.Second, "how long the gateway and sidecar may take to become ready (2m with --backend kubernetes)")
	f.BoolVar(&o.keep, "keep", false, "keep containers and networks after the run (servers still running; gc leaves them) and print the commands that remove them")
	f.BoolVar(&o.quiet, "quiet", false, "print no progress lines")
	o.otlp.add(cmd, false)
	f.BoolVar(&o.json, "json", false, "print a JSON summary on stdout (the workload's stdout goes to stderr)")
	f.BoolVar(&o.allowOldEngine, "allow-old-engine", os.Getenv(envAllowOldEngine) == "1",
		"accept a Docker Engine older than 26 (recorded as a degradation; env "+envAllowOldEngine+"=1)")
	f.StringVar(&o.gatewayEngine, "gateway-engine", orchestrate.EngineOurs,
		"egress gateway: ours (mcpsidecar gateway) or squid (Squid with the generated squid.conf)")
	f.StringVar(&o.squidImage, "squid-image", orchestrate.DefaultSquidImage,
		"Squid image for --gateway-engine squid; must be on the engine (never pulled): scripts/build-squid-image.sh builds "+egress.SquidImage)
	f.StringVar(&o.subnetPool, "subnet-pool", orDefault(os.Getenv(envSubnetPool), orchestrate.DefaultSubnetPool),
		"private IPv4 range (CIDR, /27 or larger) each run's two /28 networks are taken from (env "+envSubnetPool+")")
	addTestFlags(cmd, o) // testcommands.go: only in the test binary
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
	if err := o.own.validate(); err != nil {
		return err
	}
	return o.validateEngine()
}

func newRunCmd(s Streams) *cobra.Command {
	return newSandboxCmd(s, sandboxCommand{
		name: "run", workload: orchestrate.WorkloadAgent,
		short: "Run the agent in a hardened, disposable sandbox and keep the record",
		long: `run builds (or reuses) the FROM-scratch image, creates the run's internal and
egress networks, starts the egress gateway and the MCP sidecar, runs the agent
with its output streamed here, saves every artifact under the run directory, and
removes every container and network it created — on success, failure, timeout
and Ctrl-C alike (a second Ctrl-C forces an exit; "mcpsidecar gc" cleans up).

Phases, each one progress line on stderr: spec, preflight, image, run-dir,
networks, gateway, sidecar, agent, wait, collect, teardown.

The spec: --spec FILE, else ./sandbox_spec.toml, else the built-in default. A
./sandbox_spec.toml found here that softens the sandbox beyond the built-in
default is refused (exit 6) until you trust its exact content (mcpsidecar spec
trust), or pass --trust-spec, or set ` + envTrustSpec + ` to its sha256. Before it
starts, run prints the softening ledger's summary of a spec file that softens
anything (not under --quiet).

With --backend kubernetes the roles run as three pods in a namespace of the
run's own (phases: ..., run-dir, kube-image, pods, wait, collect, teardown),
the namespace is deleted on every path, and the record is the same
(docs/kubernetes.md). Docker still builds the image.

Environment: OPENAI_API_KEY (required by openai_agents), OPENAI_BASE_URL (any
OpenAI-compatible /v1 endpoint; its host, with the port when not 80/443, must be
in allowed_domains or allowed_ip_addresses), OPENAI_MODEL, DOCKER_HOST,
` + envAllowOldEngine + `, ` + envTrustSpec + `, and
` + envCABundle + `: the PEM bundle of CA certificates the sandbox trusts
(default: the host's, /etc/ssl/certs/ca-certificates.crt on Linux, /etc/ssl/cert.pem
on macOS, the ROOT certificate store on Windows). Set it behind a TLS-inspecting
corporate proxy, or for a model or MCP server signed by a private CA, when an
error says "certificate signed by unknown authority".`,
		args:        cobra.ArbitraryArgs, // the workload's command, after --
		progress:    true,
		ledger:      true,
		ownWorkload: true,
		timeout:     10 * time.Minute,
		flags: func(cmd *cobra.Command, o *sandboxOptions) {
			cmd.Flags().StringVar(&o.question, "question", "", "the question for the agent (default: the seed's); any other question is judged by exit 0, an answer saved and printed, and a complete audit, and the model may use any tools or none")
			addProgressFlags(cmd, o) // progress.go
		},
	})
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
