//go:build linux

package roles

import (
	"context"
	"fmt"

	"github.com/mcpsidecar/mcpsidecar/internal/kube/netguard"
)

// netguardCmd is the hidden role of the Kubernetes agent pod's init
// container: it installs the pod's own network rules (package netguard)
// and exits. It is the only container of a run with CAP_NET_ADMIN.
func netguardCmd(_ context.Context, args []string, s Streams) error {
	var allow stringList
	f := newFlags(netguard.Role+" --"+netguard.FlagAllow+" ADDR:PORT ...",
		"Install the agent pod's nftables rules: loopback, replies and TCP to the given addresses only (Kubernetes init container)", s)
	f.Var(&allow, netguard.FlagAllow, "allowed TCP destination ADDR:PORT (repeat)")
	if err := f.noArgs(args); err != nil {
		return err
	}
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
}
