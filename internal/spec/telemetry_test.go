package spec

import (
	"slices"
	"strings"
	"testing"
)

// TestAgentTelemetrySoftens: agent_telemetry opens the relay in each
// layer, records each in the ledger, and counts as beyond the default;
// without it nothing of the relay is there.
func TestAgentTelemetrySoftens(t *testing.T) {
	on := resolveFile(t, "testdata/valid/agent_telemetry.toml")
	off := resolveFile(t, "testdata/valid/seed_mcpsidecar.toml")
	for _, tt := range []struct {
		p    *Profile
		want bool
	}{{on, true}, {off, false}} {
		gw, ag := tt.p.Containers[RoleGateway], tt.p.Containers[RoleAgent]
		got := map[string]bool{
			"gateway flag":        slices.Contains(gw.Cmd, "--otlp-relay-listen"),
			"gateway bind":        slices.Contains(gw.Harden.Landlock.BindTCP, RelayPort),
			"agent connect":       slices.Contains(ag.Harden.Landlock.ConnectTCP, RelayPort),
			"agent endpoint":      ag.Env[EnvOTLPEndpoint] == RelayURL,
			"gateway in NO_PROXY": strings.Contains(ag.Env["NO_PROXY"], GatewayAlias),
		}
		for what, g := range got {
			// openai_agents' held key already puts the gateway in NO_PROXY.
			if g != tt.want && what != "gateway in NO_PROXY" {
				t.Errorf("agent_telemetry %v: %s is %v", tt.want, what, g)
			}
		}
		n := 0
		for _, e := range tt.p.Ledger {
			if e.Capability == keyAgentTelemetry {
				n++
			}
		}
		if (n == 4) != tt.want || (n == 0) == tt.want {
			t.Errorf("agent_telemetry %v: %d ledger entries", tt.want, n)
		}
	}
	beyond, err := BeyondDefault(on)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(beyond, func(e Softening) bool { return e.Capability == keyAgentTelemetry && e.Layer == LayerEgress }) {
		t.Errorf("BeyondDefault misses the relay: %+v", beyond)
	}
	if on.SpecHash == off.SpecHash {
		t.Error("agent_telemetry does not change the spec's hash")
	}
}
