package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// ledger records, for each capability (and for the spec's own allowlists
// and host variables), exactly what it opened and in which layer. The
// hardened default is what no entry mentions.
func ledger(s *Spec, gw *netpolicy.Config, creds []ResolvedCredential) []Softening {
	var l []Softening
	add := func(capability, layer, format string, args ...any) {
		l = append(l, Softening{Capability: capability, Layer: layer, What: fmt.Sprintf(format, args...)})
	}
	if s.Has(CapNetwork) {
		add(CapNetwork, LayerTopology, "gateway container %s:%d joins the internal network and the egress network (the only route out)", GatewayAlias, GatewayPort)
		add(CapNetwork, LayerDocker, "agent joins the internal network instead of network mode none; HTTP(S)_PROXY=%s", ProxyURL)
		add(CapNetwork, LayerLandlock, "agent may connect to TCP port %d (the gateway)", GatewayPort)
		add(CapNetwork, LayerEgress, "HTTP to ports %s, CONNECT to ports %s, public addresses only", ports(gw.HTTPPorts), ports(gw.ConnectPorts))
		for _, d := range s.AllowedDomains {
			add(CapNetwork, LayerEgress, "allowed_domains entry %q", d)
		}
		for _, ip := range s.AllowedIPs {
			add(CapNetwork, LayerEgress, "allowed_ip_addresses entry %q (also reachable if non-public)", ip)
		}
	}
	if s.Has(CapMCPClient) {
		add(CapMCPClient, LayerTopology, "sidecar container %s:%d on the internal network, reaching upstream MCP servers only through the gateway", SidecarAlias, SidecarPort)
		add(CapMCPClient, LayerEnv, "agent gets %s=%s", EnvSidecarURL, SidecarURL)
		add(CapMCPClient, LayerLandlock, "agent may connect to TCP port %d (the sidecar)", SidecarPort)
	}
	if s.Has(CapOpenAIAgents) {
		add(CapOpenAIAgents, LayerEgress, "adds domain rule %s", openAIDomain)
		add(CapOpenAIAgents, LayerEnv, "forwards %s from the host to the agent", strings.Join(forwardedOpenAI(creds), ", "))
	}
	held := false
	for _, c := range creds {
		if c.Lives == LivesSandbox {
			add(keyCredsInSandbox, LayerCreds, "the real %s (for %s) is in the agent's environment: the workload can read it and send it anywhere the allowlist reaches", c.FromHost, c.Host)
		} else {
			held = true
			add(keyCreds, LayerCreds, "the gateway holds %s and adds it as %s on requests to %s through its credential listener %s:%d; the agent holds a per-run placeholder", c.FromHost, c.Header, c.Host, GatewayAlias, CredentialPort)
		}
	}
	if held && s.Has(CapNetwork) && gw != nil && len(gw.ConnectPorts) > 0 {
		add(keyCreds, LayerEgress, "CONNECT tunnels (ports %s) to the allowed hosts are TLS the gateway does not open: a held value the workload had learned could leave through one unsearched (answers on the credential listener are scrubbed of held values, and plain-HTTP requests carrying one are refused, so it should never learn one)", ports(gw.ConnectPorts))
	}
	telemetryLedger(s, add)
	bestEffortLedger(s, add)
	if s.Has(CapShellAccess) {
		add(CapShellAccess, LayerSpawn, "agent may execve/execveat (the no-spawn filter is not installed)")
	}
	for _, v := range s.Env {
		if v.FromHost {
			add("environment_variables", LayerEnv, "forwards %s from the host to the agent", v.Name)
		}
	}
	return l
}

func ports(ps []uint16) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

// forwardedOpenAI are the openai_agents variables still copied into the
// agent: the key and base URL only when they live in the sandbox.
func forwardedOpenAI(creds []ResolvedCredential) []string {
	return withoutHeld(slices.Clone(openAIForward), creds)
}
