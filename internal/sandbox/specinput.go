package sandbox

import "github.com/mcpsidecar/mcpsidecar/internal/spec"

// SpecInput is the sandbox spec a lifecycle runs, as its caller read it
// (cli: --spec, ./sandbox_spec.toml or the built-in default, read once and
// checked by the spec gate; the lifecycle never reads a second copy). The
// "spec" phase prints Name, then fails with Err (exit 3), or resolves
// Spec.
type SpecInput struct {
	// Name is the spec's name in messages: its path, or "built-in
	// default"; "" prints no "spec:" line.
	Name string
	// Spec is the validated spec; nil when Err is set.
	Spec *spec.Spec
	// Err is why reading, validating or resolving the spec failed.
	Err error
}
