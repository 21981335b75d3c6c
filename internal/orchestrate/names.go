package orchestrate

import (
	"github.com/mcpsidecar/mcpsidecar/internal/agent/agentenv"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Roles of the containers of one run (spec.Role*).
const (
	RoleGateway = "gateway"
	RoleSidecar = "sidecar"
	RoleAgent   = "agent"
)

// Environment variables the harness adds to containers.
const (
	EnvRunID    = netpolicy.EnvRunID // the gateway's (internal/netpolicy owns it)
	EnvQuestion = agentenv.Question  // the agent's (internal/agent owns it)
)

// AuditFile is the sidecar's audit log, in its output directory.
const AuditFile = runs.FileAudit

// Label keys carried by every resource, so gc can find what a dead run left.
const (
	LabelApp  = "mcpsidecar"
	LabelRun  = "mcpsidecar.run"
	LabelPID  = "mcpsidecar.pid"
	LabelHost = "mcpsidecar.host"
	LabelRole = "mcpsidecar.role"
)

// Workload is what the agent container runs.
type Workload string

// Workloads.
const (
	WorkloadAgent Workload = "agent"       // the model loop (run)
	WorkloadCheck Workload = "agent-check" // the connectivity check (doctor)
	WorkloadProbe Workload = "probe"       // the probe suite (test-sandbox)
)

// InternalNetwork is the name of the run's network with no route out.
func InternalNetwork(runID string) string { return "mcpsidecar-" + runID + "-internal" }

// EgressNetwork is the name of the run's network with a route out.
func EgressNetwork(runID string) string { return "mcpsidecar-" + runID + "-egress" }

// ContainerName is the name of a container of the run, from the spec's
// role-specific stem.
func ContainerName(stem, runID string) string { return stem + "-" + runID }

// dockerID is the run id as it appears in Docker names: run ids are unique
// within one runs directory only, Docker names on the whole engine, so a
// per-run token keeps two runs started in the same second apart.
func (in Input) dockerID() string {
	if in.Token == "" {
		return in.RunID
	}
	return in.RunID + "-" + in.Token
}
