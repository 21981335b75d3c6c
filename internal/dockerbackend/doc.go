// Package dockerbackend is the Docker backend of the lifecycle
// (sandbox.Backend, [New]): the plan's containers on the Docker engine
// the lifecycle was given, through orchestrate.Session. It owns what only
// a run on the engine needs, in a value made per run: the choice of the
// roles' output place (host directories made noexec through
// internal/hostoutput, or engine volumes kept by a holder container and
// read through the API, outputvolume.go, launchervolume.go), every role
// held at start and read from outside before its release (outside.go,
// on the engine-only path through helper containers, routehelper.go),
// an old engine's default route removed, the output cap on host
// directories (outputcap.go), the engine's machine and mode
// (engineinfo.go) and the bridge check. It records through the
// sandbox.Job it is given and talks to the engine only through
// dockerx.Engine.
//
// It lives beside the Kubernetes backend's internal/kube/backend, not
// under internal/sandbox: sandbox imports neither backend, and the
// Kubernetes backend does not import this one (internal/contract,
// TestBackendsApart); cli chooses it (--backend docker, the default).
//
// Environment variables it reads (through sandbox.Job.Getenv):
// MCPSIDECAR_OUTPUT (EnvOutput), MCPSIDECAR_ALLOW_NO_LIMITS
// (EnvAllowNoLimits) and internal/hostoutput's
// MCPSIDECAR_ALLOW_EXEC_OUTPUT.
package dockerbackend
