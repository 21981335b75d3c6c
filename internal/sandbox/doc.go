// Package sandbox carries one sandbox lifecycle — run, doctor or
// test-sandbox — from the spec to the teardown: [Run] loads and resolves
// the spec, checks the engine and the host, builds or reuses the image,
// creates the run directory and the plan, creates the networks, starts the
// gateway and the sidecar, runs the workload, collects every artifact,
// judges the verdict and removes what it created, on every path. Its
// inputs are values (Options): the spec the caller read (SpecInput), the
// flags' settings; the policy of a run is the lifecycle's own, the MCP
// servers' pins included (mcp.go: the sidecar's pins and credential
// placeholder, the refusal of Squid, the first run's pins written to the
// lock). The Docker engine is passed in (a fake one in tests); the
// package reads no flag and decides no process exit code beyond the one
// it records in run-metadata.json (internal/exitcode).
//
// The lifecycle is one sequence of stages (spec, preflight, image,
// run-dir, the backend's apply, collect, verdict, teardown) over a
// [Backend] that cli chooses: internal/dockerbackend, or
// internal/kube/backend. No file of the package names a backend, and it
// imports neither (internal/contract, TestLifecycleNamesNoBackend,
// TestBackendsApart): what only one backend needs (Docker's output
// volumes, holds and helpers; a cluster's namespace) is that backend's,
// reached through the [Job] it is given. The verdict is
// internal/verdict's Judge over the run's record (record.go).
//
// Where a feature joins the lifecycle:
//
//   - Options.PlanInput changes the plan's input (steps.go, makeRunDir)
//     before orchestrate.NewPlan builds the plan: environment for a role,
//     another image or command for the agent-role container.
//   - Options.Plan changes the built plan (steps.go, makeRunDir) before
//     anything is created: a container's Docker options (its Spec).
//   - Options.Watch runs beside the run from the run directory's creation
//     to the workload's end (steps.go, startWatch), for progress lines and
//     the live trace export: it observes, and changes nothing of the run.
//   - Options.OnPhase sees each phase's record as it ends (sandbox.go,
//     phaseLog).
//   - Options.Checks adds host-side checks to the verdict (record.go,
//     verdict); a row that `agent --check` prints in the container becomes
//     a doctor check by itself (verdict.CheckTable).
package sandbox
