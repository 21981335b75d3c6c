// Package plan holds a run's objects as data, whatever runs them: the
// containers (image, command, user, environment, mounts, limits,
// capabilities, the seccomp profile, no_new_privs), the networks and each
// container's attachments to them; and the aggregate that orders them
// (Plan, Step: the creation order, readiness, which roles are held until
// read, the stop order, the phases a backend walks). internal/orchestrate
// builds them from a resolved profile; internal/dockerx maps them to the
// Docker API and internal/kube to Kubernetes objects, each on its own.
//
// It imports nothing but the standard library: a backend, the planner and
// the verdict can all use it without pulling another's dependencies, and
// no field is any backend's option string (no "seccomp=<json>" to parse).
package plan
