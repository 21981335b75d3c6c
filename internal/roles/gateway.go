//go:build linux

package roles

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Environment variables the gateway command reads (flags win).
const (
	envGatewayPolicy = netpolicy.EnvPolicy // netpolicy.Config JSON when --policy is absent
	envRunID         = netpolicy.EnvRunID  // default of --run-id
)

// gatewayOptions are the gateway command's flags.
type gatewayOptions struct {
	listen       string
	credListen   string
	relayListen  string
	policyFile   string
	decisionLog  string
	runID        string
	maxTunnels   int
	idleTimeout  time.Duration
	maxDuration  time.Duration
	shutdownWait time.Duration
	logBudget    int64 // test builds only (--x-log-budget); 0: the default
}

// gatewayLong is the gateway's help.
const gatewayLong = `Serve the egress gateway: an HTTP forward proxy (absolute-URI requests) and CONNECT
proxy that allows only the names in allowed_domains and the addresses in
allowed_ip_addresses, on ports 80/443 (CONNECT: 443), as the policy says.

A name is matched before any DNS lookup; every address it resolves to must be public
or covered by allowed_ip_addresses; the gateway dials exactly a checked address.
Each request is one JSON line in the decision log (docs/egress.md); without
--decision-log the lines go to standard output. A direct GET /healthz answers 200.
Once the decision log is full (its byte budget, below the host's 64 MiB copy cap and
the role's file size limit) or a write to it fails, its last line says so and the
gateway answers every request 503, the probe included.

The policy is the JSON gateway policy written by 'mcpsidecar spec resolve'; without
--policy it is read from $MCPSIDECAR_GATEWAY_POLICY. --run-id defaults to
$MCPSIDECAR_RUN_ID. With --credential-listen the gateway holds the credentials that
$MCPSIDECAR_GATEWAY_CREDENTIALS names (values from the variables it names, the run's
placeholder from $MCPSIDECAR_CREDENTIAL_PLACEHOLDER) and serves requests of the form
/HOST[:PORT]/path there, adding the credential of HOST (docs/egress.md). With
--otlp-relay-listen it takes the agent's OTLP/HTTP (POST /v1/traces, /v1/metrics,
/v1/logs; protobuf or JSON) there, bounded, one decision line each, and appends each
payload to agent-telemetry.jsonl beside the decision log. In a container, $MCPSIDECAR_HARDEN_POLICY locks the process down
before it serves. SIGTERM or SIGINT closes every tunnel and syncs the log.`

func gatewayCmd(ctx context.Context, args []string, s Streams) error {
	var o gatewayOptions
	f := newFlags("gateway [flags]", gatewayLong, s)
	lim := egress.DefaultLimits()
	f.StringVar(&o.listen, "listen", ":3128", "address to listen on")
	f.StringVar(&o.credListen, "credential-listen", "", "also serve the credential listener here (credentials from $"+spec.EnvGatewayCredentials+")")
	f.StringVar(&o.relayListen, "otlp-relay-listen", "", "also relay the agent's own OTLP/HTTP telemetry here (spooled beside the decision log for the host to send on)")
	f.StringVar(&o.policyFile, "policy", "", "gateway policy JSON file (default: $"+envGatewayPolicy+")")
	f.StringVar(&o.decisionLog, "decision-log", "", "append decision lines (JSON) to this file (default: standard output)")
	f.StringVar(&o.runID, "run-id", os.Getenv(envRunID), "run id written into every decision line")
	f.IntVar(&o.maxTunnels, "max-tunnels", lim.MaxConcurrent, "maximum concurrent tunnels plus forwarded requests")
	f.DurationVar(&o.idleTimeout, "idle-timeout", lim.IdleTimeout, "close a tunnel with no traffic for this long")
	f.DurationVar(&o.maxDuration, "max-duration", lim.MaxDuration, "close a tunnel or forwarded request older than this")
	f.DurationVar(&o.shutdownWait, "shutdown-timeout", egress.DefaultShutdownWait, "how long shutdown waits for the forwarded requests it cancels (each is logged as interrupted)")
	addGatewayTestFlags(f, &o.logBudget) // testflags.go: only in the test binary
	if err := f.noArgs(args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return runGateway(ctx, s, o, os.Getenv)
}

func (o gatewayOptions) validate() error {
	switch {
	case o.listen == "":
		return usageErrorf("--listen: want host:port")
	case o.maxTunnels < 1:
		return usageErrorf("--max-tunnels %d: want at least 1", o.maxTunnels)
	case o.idleTimeout <= 0, o.maxDuration <= 0, o.shutdownWait <= 0:
		return usageErrorf("--idle-timeout, --max-duration and --shutdown-timeout must be positive")
	}
	return nil
}

// loadGatewayPolicy reads the policy from --policy or the environment and
// compiles it. A bad policy is a usage error naming where it came from.
func loadGatewayPolicy(file string, getenv func(string) string) (*netpolicy.Policy, error) {
	src, data := "$"+envGatewayPolicy, []byte(getenv(envGatewayPolicy))
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErrorf("reading gateway policy: %v", err)
		}
		src, data = file, b
	}
	if len(data) == 0 {
		return nil, usageErrorf("no gateway policy: pass --policy FILE or set $%s", envGatewayPolicy)
	}
	var c netpolicy.Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, usageErrorf("gateway policy %s: %v", src, err)
	}
	p, err := netpolicy.Compile(c)
	if err != nil {
		return nil, usageErrorf("gateway policy %s: %v", src, err)
	}
	return p, nil
}

func runGateway(ctx context.Context, s Streams, o gatewayOptions, getenv func(string) string) error {
	policy, err := loadGatewayPolicy(o.policyFile, getenv)
	if err != nil {
		return err
	}
	var inject *egress.Injection
	if o.credListen != "" {
		if inject, err = loadInjection(getenv, os.Unsetenv); err != nil {
			return err
		}
	}
	scopes, err := gatewayScopes(getenv) // mcp_roles.go: egress scoped per declared MCP server
	if err != nil {
		return err
	}
	cfg := egress.ServeConfig{Listen: o.listen, CredentialListen: o.credListen, RelayListen: o.relayListen, DecisionLog: o.decisionLog, Out: s.Out,
		Logger: slog.New(slog.NewJSONHandler(s.Err, nil)), Policy: policy, Injection: inject, Scopes: scopes, RunID: o.runID,
		Limits:       egress.Limits{MaxConcurrent: o.maxTunnels, IdleTimeout: o.idleTimeout, MaxDuration: o.maxDuration},
		ShutdownWait: o.shutdownWait, LogBudget: o.logBudget}
	return egress.Serve(ctx, cfg, func() error {
		return hardenRole(ctx, "gateway", getenv, s.Err, false, reportDir(o.decisionLog))
	})
}

// reportDir is where the role writes its harden report: next to the
// decision log, in the output directory the host collects.
func reportDir(decisionLog string) string {
	if decisionLog == "" {
		return ""
	}
	return filepath.Dir(decisionLog)
}
