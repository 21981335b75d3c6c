//go:build linux

package cli

import (
	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/inside"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
)

// platformCommands are the in-container roles and the hidden helpers the
// backends run in containers and pods. They exist only in a Linux build:
// they run in the sandbox's containers, and internal/contract checks that
// a Windows or macOS host binary imports none of their code.
func platformCommands() commandSet {
	return commandSet{
		builds: []func(Streams) *cobra.Command{
			newAgentCmd, newSidecarCmd, newGatewayCmd, newProbeCmd,
			// A user's workload container's entrypoint (launch.go); the
			// Kubernetes agent pod's init container (netguard.go).
			newLaunchCmd, newNetguardCmd,
			// The Kubernetes backend's (kube_hold.go, kube_layer.go).
			newKubeHoldCmd, newKubeStopCmd, newKubeReadCmd, newKubeLayerCmd,
			// The Docker backend's (engine_helpers.go).
			newHoldReleaseCmd, newDropRouteCmd, newObserveCmd, newAwaitReadyCmd, newProbeGatewayCmd, newCopySelfCmd,
		},
		// The roles' output is collected by the host; kube-read-output's
		// stdout is a tar, observe-role's JSON for the host, copy-self's
		// the copy's digest.
		products: []string{"agent", "gateway", "sidecar", "probe", kube.ReadCommand, inside.ObserveCommand, inside.CopySelfCommand},
	}
}
