// Package harden is the only package that installs restrictions on a
// process: the Landlock filesystem and network rules, the seccomp filter that
// forbids process spawning (and Unix sockets, MPTCP, ptrace, namespaces,
// mounts, keyrings, io_uring, TCP Fast Open, setuid modes, raw sockets;
// listening, UDP and netlink where the role needs none), no_new_privs, the Go runtime limits
// matched to the container, and, where the engine sets none (a pod), the resource limits of
// [EnvRlimits] ([ApplyRlimits], before [Apply]). A role applies its [Policy] with [Apply] before
// it does any work, and writes the [Report] with [WriteReport]. A layer the
// kernel cannot enforce is an [*UnavailableError] unless the policy accepts
// it as best effort.
//
// It must not import the spec compiler (the spec compiler produces its
// [Policy]) and reads no environment itself: [PolicyFromEnv] is handed a
// getenv by the cli. [Try] and [RunChecks] are the self-test's attempts,
// used by the hidden harden-selftest command and the tests.
package harden

import "github.com/mcpsidecar/mcpsidecar/internal/harden/hardenpolicy"

// The policy's names live in internal/harden/hardenpolicy, which the host
// imports without this package's code; these are the same names.

// Schema is the value of [Policy.Schema] this package understands.
const Schema = hardenpolicy.Schema

// Layer names, as used in [Policy.BestEffort] and in error messages.
const (
	LayerLandlockFS  = hardenpolicy.LayerLandlockFS
	LayerLandlockNet = hardenpolicy.LayerLandlockNet
	LayerNoSpawn     = hardenpolicy.LayerNoSpawn
	LayerNoUnix      = hardenpolicy.LayerNoUnix
	LayerSyscallDeny = hardenpolicy.LayerSyscallDeny
	LayerNoListen    = hardenpolicy.LayerNoListen
	LayerNoUDP       = hardenpolicy.LayerNoUDP
	LayerNoNetlink   = hardenpolicy.LayerNoNetlink
)

// Policy is what one role locks itself down to ([hardenpolicy.Policy]).
type Policy = hardenpolicy.Policy

// Landlock is the filesystem and network part of a [Policy].
type Landlock = hardenpolicy.Landlock

// EnvPolicy is the environment variable that carries a role's [Policy] as
// JSON into its container.
const EnvPolicy = hardenpolicy.EnvPolicy

// maxABI is the highest Landlock ABI go-landlock v0.11 knows.
const maxABI = hardenpolicy.MaxABI

// PolicyFromEnv reads the policy from [EnvPolicy] through getenv
// ([hardenpolicy.PolicyFromEnv]): ok=false and no error when it is unset.
func PolicyFromEnv(getenv func(string) string) (p *Policy, ok bool, err error) {
	return hardenpolicy.PolicyFromEnv(getenv)
}

// ParsePolicy decodes a policy strictly and validates it
// ([hardenpolicy.ParsePolicy]).
func ParsePolicy(data []byte) (*Policy, error) { return hardenpolicy.ParsePolicy(data) }
