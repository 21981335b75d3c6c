// Package verdict holds the host's judgements of a run, which run on the
// host and never in a container: [CheckHost], the preflight before
// anything is created (the model key is set and the gateway policy allows
// the model's host), and [Judge], the verdict over a run's [Record]: the
// collected run directory and what the lifecycle saw, whatever backend
// ran the plan (the workload's own checks — an agent's answer and tool
// calls, doctor's check table, the probe suite's report — then each
// role's hardening, the backend's own checks, the credentials, the output
// caps and the record's completeness: no role killed at the stop, no log
// full, the decision log joined with the other records).
//
// It reads the agent's contract (its variable names, tool names and
// turn records) from internal/agent and the run directory's file names
// from internal/runs. It must not be imported by a role package (the
// import rules in internal/contract), and it reads the run directory
// without following a link the workload could have planted.
package verdict
