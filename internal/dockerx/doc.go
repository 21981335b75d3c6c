// Package dockerx is the only package that talks to the Docker Engine: it
// wraps github.com/moby/moby/client behind the narrow [Engine] interface and
// translates the plain, Docker-free descriptions of networks, containers and
// images ([NetworkSpec], [ContainerSpec], [ImageFiles]) into Engine API calls.
//
// It is also the only package that touches, on this host, a process the
// engine named: [Prove] (proof_linux.go, the one file that opens
// /proc/<pid>/ of such a process or enters its namespaces) shows the pid
// is the container's process here and holds it, and every use goes
// through the [Process] it returns. Threat: the engine's pid is in its own
// pid namespace, and names an unrelated process here when the engine is
// on another host, in a VM or in a container.
//
// It decides nothing: which containers exist, how they are hardened and what
// they may reach is decided by internal/orchestrate. It must not read flags
// or the environment beyond what client.FromEnv reads (DOCKER_HOST and the
// TLS variables), and it must never pull an image from a registry.
package dockerx
