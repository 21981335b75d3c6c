//go:build linux

package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/kube/netguard"
)

// newNetguardCmd is the hidden role of the Kubernetes agent pod's init
// container: it installs the pod's own network rules (package netguard)
// and exits. It is the only container of a run with CAP_NET_ADMIN.
func newNetguardCmd(s Streams) *cobra.Command {
	var allow []string
	cmd := &cobra.Command{
		Use:    netguard.Role + " --" + netguard.FlagAllow + " ADDR:PORT ...",
		Short:  "Install the agent pod's nftables rules: loopback, replies and TCP to the given addresses only (Kubernetes init container)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := netguard.Parse(allow)
			if err != nil {
				return usageErrorf("netguard: %v", err)
			}
			if err := netguard.Install(c); err != nil {
				return fmt.Errorf("netguard: %w", err)
			}
			fmt.Fprintf(s.Err, "netguard: table inet %s installed: loopback, established, %d TCP destination(s) %v; everything else dropped\n",
				netguard.TableName, len(c.Allow), c.Allow)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&allow, netguard.FlagAllow, nil, "allowed TCP destination ADDR:PORT (repeat)")
	return cmd
}
