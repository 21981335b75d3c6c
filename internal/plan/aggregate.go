package plan

// Plan is the exact set of resources of one run, in creation order.
type Plan struct {
	RunID string `json:"run_id"`
	// SubnetPool is where the Docker session finds each network's
	// subnet when the planned one is taken (orchestrate/subnet.go).
	SubnetPool string    `json:"subnet_pool"`
	Networks   []Network `json:"networks"`
	Containers []Step    `json:"containers"`
}

// Step is one container of the plan and how to tell it is ready.
type Step struct {
	Role      string    `json:"role"`
	OutputDir string    `json:"output_dir"` // host side of the output mount
	Spec      Container `json:"spec"`
	// Ready, when set, is an HTTP GET on the container's address on
	// Ready.Network that must answer 200 before the next step starts.
	Ready *Readiness `json:"ready,omitempty"`
	// Workload marks the container whose exit ends the run.
	Workload bool `json:"workload,omitempty"`
	// Hold: the role waits, hardened, for its release file in its output
	// directory (internal/hold) until the backend has read it.
	Hold bool `json:"hold,omitempty"`
	// DropRoute: while the role is held, the harness removes the default
	// route an old engine gave it.
	DropRoute bool `json:"drop_route,omitempty"`
	// StopAfter are the roles whose containers must have exited before
	// this one is signalled to stop: they still use it while they stop.
	StopAfter []string `json:"stop_after,omitempty"`
	// Hosts are /etc/hosts entries added when the container is created,
	// each the address on the internal network of a role before it in the
	// plan: the fixed one Session.CreateNetworks planned for it, or else
	// the one it got when it started. The role then needs no resolver to
	// find its peers.
	Hosts []HostAlias `json:"hosts,omitempty"`
}

// HostAlias names a peer's alias and the role whose internal address it
// resolves to.
type HostAlias struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Readiness is an HTTP GET that must answer 200, or with TCP a TCP
// connection that is accepted (Squid has no health endpoint). Either is
// made to 127.0.0.1:Port inside the container's own network namespace:
// the host never sends a packet to a container's network address.
type Readiness struct {
	Port int    `json:"port"`
	Path string `json:"path"`
	TCP  bool   `json:"tcp,omitempty"`
}

// PhaseNetworks and PhaseWait are the phases of a run that are not named
// by a step's role.
const (
	PhaseNetworks = "networks"
	PhaseWait     = "wait"
)

// Phases are the phases a backend walks for the plan, in order: the
// networks, one per container step named by its role, and, after the
// workload's step, the wait for its exit.
func (p Plan) Phases() []string {
	out := []string{PhaseNetworks}
	for _, st := range p.Containers {
		out = append(out, st.Role)
		if st.Workload {
			out = append(out, PhaseWait)
		}
	}
	return out
}
