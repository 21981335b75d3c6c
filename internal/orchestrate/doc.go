// Package orchestrate turns a resolved profile into a [Plan] — the exact
// networks and containers of one run, with every mount, limit, capability,
// security option, environment variable, label and alias — and then carries
// a plan out ([Apply]) and undoes it ([Teardown]).
//
// Decide purely, act thinly: [NewPlan] performs no I/O and is tested field by
// field without Docker; Apply and Teardown only execute a plan through the
// dockerx.Engine interface; the one thing they read from the host besides
// the engine is its addresses and routes (HostPrefixes), which a run's
// subnets must not shadow, and, through dockerx, the containers' own
// processes (readiness inside their network namespace, the workload's
// end as the kernel reports it), each only once the engine has proven
// it to be the container's on this host (dockerx.Engine.Process; without
// the proof readiness is the engine's word). This package never imports the Docker SDK,
// never reads flags or the environment, and never writes artifacts (the
// caller does, through internal/runs).
package orchestrate
