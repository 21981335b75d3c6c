//go:build linux

package roles

import (
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
	"github.com/mcpsidecar/mcpsidecar/internal/kube/layercheck"
	"github.com/mcpsidecar/mcpsidecar/internal/kube/netguard"
)

// table is every command of the role binary. The roles' output is
// collected by the host (the agent's stdout is its answer, compared byte
// for byte with answer.txt); kube-read-output's stdout is a tar,
// observe-role's JSON for the host, copy-self's the copy's digest.
var table = []Command{
	{Name: "agent", Short: "Run the agent workload (inside the sandbox container only)", Listed: true, Product: true, run: agentCmd},
	{Name: "sidecar", Short: "Serve the MCP sidecar (streamable HTTP at /mcp, readiness at /healthz)", Listed: true, Product: true, run: sidecarCmd},
	{Name: "gateway", Short: "Serve the egress gateway (HTTP forward and CONNECT proxy, deny by default)", Listed: true, Product: true, run: gatewayCmd},
	{Name: "probe", Short: "Run the probe suite inside the sandbox (test-sandbox starts it)", Listed: true, Product: true, run: probeCmd},
	// A user's workload container's entrypoint (launch.go); the
	// Kubernetes agent pod's init container (netguard.go).
	{Name: "launch", Short: "Harden this process with $MCPSIDECAR_HARDEN_POLICY, then run CMD (the workload container's entrypoint)", run: launchCmd},
	{Name: netguard.Role, Short: "Install the agent pod's nftables rules: loopback, replies and TCP to the given addresses only (Kubernetes init container)", run: netguardCmd},
	// The Kubernetes backend's (kube_hold.go, kube_layer.go).
	{Name: holder.HoldCommand, Short: "Wait until stopped, keeping a Kubernetes pod and its output volume (the holder container)", run: kubeHoldCmd},
	{Name: holder.StopCommand, Short: "Send SIGTERM to this container's role, PID 1 (the Kubernetes backend's stop)", run: kubeStopCmd},
	{Name: holder.ReadCommand, Short: "Write the named regular files of DIR as a tar on stdout (the Kubernetes backend's record reader)", Product: true, run: kubeReadCmd},
	{Name: layercheck.Command, Short: "Listen or dial once inside the run's namespace (test-sandbox's isolation-layer pods on Kubernetes)", run: kubeLayerCmd},
	// The Docker backend's (engine_helpers.go).
	{Name: hold.ReleaseCommand, Short: "Create a held role's release file (the Docker backend's release through the output holder)", run: holdReleaseCmd},
	{Name: inside.DropRouteCommand, Short: "Remove the default routes of this network namespace (the Docker backend's route fix on old engines)", run: dropRouteCmd},
	{Name: inside.ObserveCommand, Short: "Print the status of the role process in this pid namespace (the Docker backend's outside observation)", Product: true, run: observeCmd},
	{Name: inside.ReadyCommand, Short: "Wait until this network namespace's loopback answers (the Docker backend's readiness through a helper)", run: awaitReadyCmd},
	{Name: inside.ProbeGatewayCommand, Short: "Tell whether a host holds this network's gateway address (the Docker backend's bridge check through a helper)", run: probeGatewayCmd},
	{Name: inside.CopySelfCommand, Short: "Copy this binary into the launcher volume (the Docker backend's launcher for a user's workload)", Product: true, run: copySelfCmd},
}
