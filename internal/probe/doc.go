// Package probe is the sandbox probe suite: it measures, from inside the agent
// container, what the sandbox actually lets a workload do, and turns each
// measurement into a verdict. It carries the seed's catalogue (groups G01-G22
// and G30, with their ids, titles and outcome words) plus group G40, which
// checks each claim mcpsidecar's design makes (seccomp active, Landlock
// active, execve refused, no route out, gateway refusals, black-holed names,
// writable paths, capabilities, user, limits, and that no real credential
// is readable: G40 T19 with G05 T05, which recognise the run's placeholder
// by its shape, never by the key), and group G41, the ways out
// those claims did not cover (issue 12: the host's own addresses on each
// network, TCP Fast Open past the connect rule, listen without bind, UDP,
// ICMP, netlink, raw and packet sockets, setuid bits in the output
// directory, another role's output).
//
// It writes the seed's report shape (report.json: groups -> capabilities ->
// shell, tool, alternates), adding to every probe what the sandbox is
// expected to yield and a verdict: pass, violation or unsupported.
//
// It must not import what it tests (internal/harden, internal/egress,
// internal/sidecar): a probe that shares code with the layer it checks can
// share its bugs. It never sends traffic off the machine: denial probes use
// reserved names (.invalid, .test, .example), addresses inspected through the
// routing table instead of dialed, or requests the gateway refuses before any
// lookup. The G41 probes send packets, but only to the host's own addresses
// on the container's networks (computed from /proc or given in the context,
// private addresses only) and to the sandbox's own containers.
//
// The probe context (what the spec declares: capabilities, allowlist,
// gateway and sidecar URLs, writable paths, limits) is the JSON of [Context];
// the cli reads it from MCPSIDECAR_PROBE_CONTEXT and passes it in.
package probe
