//go:build !linux

package harden

// ApplyRlimits fails off Linux: roles run only inside Linux containers.
func ApplyRlimits(ls []Rlimit) (LayerStatus, error) {
	return LayerStatus{Name: LayerRlimits, Required: true}, errNotLinux
}
