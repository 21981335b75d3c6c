package dockerx

import (
	"fmt"
	"net"
)

// BridgeAddrs lists the host's addresses on the bridge of the network with
// the given ID (Docker names a user-defined bridge br-<first 12 of the ID>).
func BridgeAddrs(networkID string) ([]string, error) {
	if len(networkID) < 12 {
		return nil, fmt.Errorf("network id %q is too short", networkID)
	}
	ifi, err := net.InterfaceByName("br-" + networkID[:12])
	if err != nil {
		return nil, fmt.Errorf("finding the bridge of network %s: %w", networkID[:12], err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("listing the addresses of %s: %w", ifi.Name, err)
	}
	out := []string{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			out = append(out, ipn.String())
		}
	}
	return out, nil
}
