package spec

import (
	"github.com/pelletier/go-toml/v2/unstable"
)

// agent_telemetry = true asks the gateway to relay the agent's own
// OpenTelemetry (issue 33): a softening, since it is a channel out of
// the sandbox, outside the allowlist, for whatever the workload writes
// into its spans, metrics and logs (docs/egress.md, The agent's own
// telemetry). Off by default.
const keyAgentTelemetry = "agent_telemetry"

// The relay's fixed internal address: the standard OTLP/HTTP port on
// the gateway's alias.
const (
	RelayPort = 4318
	RelayURL  = "http://egress-gateway:4318"
)

// Variables the agent gets with agent_telemetry: the standard ones an
// OpenTelemetry SDK reads, pointing it at the relay.
const (
	EnvOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPProtocol = "OTEL_EXPORTER_OTLP_PROTOCOL"
	// EnvTraceParent is the run's trace context (the W3C traceparent of
	// the run's span), set by the harness per run (internal/orchestrate),
	// so the workload's spans can join the run's trace.
	EnvTraceParent = "TRACEPARENT"
)

func (w *walker) agentTelemetry(at pos, v *unstable.Node) {
	if v.Kind != unstable.Bool {
		w.add(w.pos(v, at), keyAgentTelemetry, "must be true or false, not %s", kindName(v))
		return
	}
	w.spec.AgentTelemetry = string(v.Data) == "true"
	w.spec.AgentTelemetryLine = w.pos(v, at).line
}

// checkTelemetry: the relay is the gateway's, which exists only with
// the network capability.
func (w *walker) checkTelemetry() {
	if w.spec.AgentTelemetry && !w.spec.Has(CapNetwork) {
		w.add(w.seen[keyAgentTelemetry], keyAgentTelemetry, "requires the network capability (the egress gateway relays the agent's telemetry)")
	}
}

// relaysTelemetry reports whether the run relays the agent's telemetry.
func relaysTelemetry(s *Spec) bool { return s.AgentTelemetry && s.Has(CapNetwork) }

// telemetryLedger is what agent_telemetry opens, layer by layer.
func telemetryLedger(s *Spec, add func(capability, layer, format string, args ...any)) {
	if !relaysTelemetry(s) {
		return
	}
	add(keyAgentTelemetry, LayerTopology, "gateway container %s:%d takes the agent's OTLP/HTTP (traces, metrics, logs; protobuf or JSON) and keeps it, with a decision line per request, for the host to send to the collector the user names", GatewayAlias, RelayPort)
	add(keyAgentTelemetry, LayerLandlock, "agent may connect to TCP port %d (the relay)", RelayPort)
	add(keyAgentTelemetry, LayerEnv, "agent gets %s=%s, %s=http/protobuf and %s (the run's trace)", EnvOTLPEndpoint, RelayURL, EnvOTLPProtocol, EnvTraceParent)
	add(keyAgentTelemetry, LayerEgress, "whatever the workload writes into its telemetry leaves for the collector, outside the allowlist, bounded per request, per second and per run (docs/egress.md); a payload carrying a held credential is refused")
}

// RelaysTelemetry reports whether the profile's run relays the agent's
// telemetry (agent_telemetry = true).
func (p *Profile) RelaysTelemetry() bool { return p.Spec != nil && relaysTelemetry(p.Spec) }
