// Package verdict holds the host's two judgements of an agent run, which
// run on the host and never in a container: [CheckHost], the preflight
// before anything is created (the model key is set and the gateway policy
// allows the model's host), and [CheckRun], the verdict over the run
// directory afterwards (the agent exited 0, its answer equals its stdout,
// every tool call it made is in the sidecar's audit).
//
// It reads the agent's contract (its variable names, tool names and
// turn records) from internal/agent and the run directory's file names
// from internal/runs. It must not be imported by a role package (the
// import rules in internal/contract), and it reads the run directory
// without following a link the workload could have planted.
package verdict
