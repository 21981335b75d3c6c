package harden

import "slices"

// RequiredLayers are the layers p asks for and does not accept as best
// effort: a report that does not list each one as enforced is not a
// hardened role. The host checks every role's report against this list,
// since the report is written by the workload and may be forged.
func (p Policy) RequiredLayers() []string {
	layers := []string{LayerLandlockFS, LayerLandlockNet, LayerSyscallDeny}
	for _, l := range p.seccompLayers() {
		if l.on {
			layers = append(layers, l.name)
		}
	}
	return slices.DeleteFunc(layers, p.bestEffort)
}

// seccompLayers are the optional seccomp layers and whether p asks for each.
func (p Policy) seccompLayers() []struct {
	name string
	on   bool
} {
	return []struct {
		name string
		on   bool
	}{
		{LayerNoSpawn, p.NoSpawn}, {LayerNoUnix, p.DenyUnixSockets},
		{LayerNoListen, p.NoListen}, {LayerNoUDP, p.NoUDP}, {LayerNoNetlink, p.NoNetlink},
	}
}
