//go:build !linux

package harden

import "errors"

var errNotLinux = errors.New("Landlock and seccomp exist only on Linux")

// Apply fails closed off Linux: no layer can be enforced. Roles only run
// hardened inside Linux containers.
func Apply(p Policy) (Report, error) {
	rep := Report{Schema: ReportSchema, Role: p.Role, Layers: []LayerStatus{}, Degradations: []string{}, DeniedSyscalls: []string{}}
	if err := p.Validate(); err != nil {
		return rep, err
	}
	err := &UnavailableError{Layer: LayerLandlockFS, Reason: "not Linux", Err: errNotLinux}
	rep.setError(err)
	return rep, err
}

var actions = map[string]func(string) error{}
