// Package roles is the command table of what runs inside the sandbox's
// containers and a run's pods: the roles (agent, sidecar, gateway, probe,
// the launcher of a user's workload, netguard) and the hidden helpers the
// backends start there (kube-hold, kube-stop, kube-read-output,
// kube-layer, hold-release, net-drop-default-route, observe-role,
// await-ready, probe-gateway, copy-self). Each command turns its flags
// (the standard library's flag package) into the options of the role's
// package, runs it, and maps its errors to the exit codes of
// internal/exitcode, with the messages and hints the host binary printed
// before; [Run] is the dispatcher.
//
// Two binaries carry it: cmd/mcpsidecar-role, the slim Linux role binary
// that goes into the image, and the host binary (internal/cli), whose
// hidden role commands delegate here. So it must not import the command
// framework (cobra), the Docker client or anything that drives it
// (dockerx, orchestrate, sandbox), the Kubernetes client (internal/kube)
// or the host's command tree (internal/cli): internal/contract checks the
// role binary's dependencies. It is Linux-only code: the containers are
// Linux.
//
// Only this package (for the roles) and internal/cli (for the host) read
// flags; each role's one config function reads the environment.
package roles
