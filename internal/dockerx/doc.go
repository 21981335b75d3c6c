// Package dockerx is the only package that talks to the Docker Engine: it
// wraps github.com/moby/moby/client behind the narrow [Engine] interface and
// translates the plain, Docker-free descriptions of networks, containers and
// images ([NetworkSpec], [ContainerSpec], [ImageFiles]) into Engine API calls.
//
// It decides nothing: which containers exist, how they are hardened and what
// they may reach is decided by internal/orchestrate. It must not read flags
// or the environment beyond what client.FromEnv reads (DOCKER_HOST and the
// TLS variables), and it must never pull an image from a registry.
package dockerx
