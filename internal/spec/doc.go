// Package spec is the sandbox spec compiler: it loads sandbox_spec.toml
// strictly (every problem, with file:line:col and key), validates it, and
// resolves it, purely, into the [Profile] every layer enforces: per-role
// container settings, the seccomp profile, the Landlock policies, the
// gateway policy, squid.conf, the Dockerfile and the softening ledger.
//
// It must not touch the world: no Docker, no network, no environment
// variables and no file writes. The only I/O is [LoadFile] reading the spec;
// host variable values named in [Container.ForwardEnv] are looked up by the
// cli at run time and never enter a [Profile].
package spec
