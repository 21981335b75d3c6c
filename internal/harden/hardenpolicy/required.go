package hardenpolicy

import "slices"

// RequiredLayers are the layers p asks for and does not accept as best
// effort: a report that does not list each one as enforced is not a
// hardened role. The host checks every role's report against this list,
// since the report is written by the workload and may be forged.
func (p Policy) RequiredLayers() []string {
	layers := []string{LayerLandlockFS, LayerLandlockNet, LayerSyscallDeny}
	for _, l := range p.SeccompLayers() {
		if l.On {
			layers = append(layers, l.Name)
		}
	}
	return slices.DeleteFunc(layers, p.AcceptsBestEffort)
}

// LayerSwitch is one optional layer and whether a policy asks for it.
type LayerSwitch struct {
	Name string
	On   bool
}

// SeccompLayers are the optional seccomp layers and whether p asks for
// each.
func (p Policy) SeccompLayers() []LayerSwitch {
	return []LayerSwitch{
		{LayerNoSpawn, p.NoSpawn}, {LayerNoUnix, p.DenyUnixSockets},
		{LayerNoListen, p.NoListen}, {LayerNoUDP, p.NoUDP}, {LayerNoNetlink, p.NoNetlink},
	}
}
