package harden

import "fmt"

// UnavailableError says the kernel cannot enforce a layer the policy
// requires (the layer is not in [Policy.BestEffort]). The role must stop:
// running on unprotected is exactly the silent "best effort" this project
// refuses. The CLI maps it to exit code 5.
type UnavailableError struct {
	Layer     string // one of the Layer* constants
	KernelABI int    // the Landlock ABI the kernel enforces (0: none)
	Reason    string // what is missing, e.g. "policy requires Landlock ABI >= 4"
	Err       error  // the underlying error, if any
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("hardening layer %s cannot be enforced (kernel Landlock ABI %d): %s", e.Layer, e.KernelABI, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *UnavailableError) Unwrap() error { return e.Err }
