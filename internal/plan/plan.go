package plan

import (
	"encoding/json"
	"time"
)

// Redacted replaces a secret value wherever a [Container] is written out.
const Redacted = "<redacted>"

// Network describes one network to create.
type Network struct {
	Name     string            `json:"name"`
	Internal bool              `json:"internal"` // no route out of the host
	Labels   map[string]string `json:"labels"`
	// Options are the driver's options (Docker's bridge driver:
	// dockerx.OptionInhibitIPv4).
	Options map[string]string `json:"options,omitempty"`
	// Subnet (CIDR) and Gateway (an address in it) are the network's IPv4
	// addresses; empty leaves the choice to the engine's default pools.
	// The engine reserves Gateway even when the host is kept from taking
	// it.
	Subnet  string `json:"subnet,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// EnvVar is one environment variable of a container. A Secret value (one
// forwarded from the host) is sent to the engine but never serialised.
type EnvVar struct {
	Name   string
	Value  string
	Secret bool
}

// MarshalJSON writes the variable with its value redacted when it is secret,
// so plans and metadata can be written to artifacts without leaking keys.
func (e EnvVar) MarshalJSON() ([]byte, error) {
	v := e.Value
	if e.Secret {
		v = Redacted
	}
	return json.Marshal(struct {
		Name   string `json:"name"`
		Value  string `json:"value"`
		Secret bool   `json:"secret,omitempty"`
	}{e.Name, v, e.Secret})
}

// Mount is a host path (or, on the engine-only path, a volume's name)
// mounted at Target.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only"`
}

// Ulimit is one resource limit (RLIMIT_*) of a container.
type Ulimit struct {
	Name string `json:"name"`
	Soft int64  `json:"soft"`
	Hard int64  `json:"hard"`
}

// Attachment connects a container to a network under some aliases, at a
// fixed IPv4 address when IPv4 is set (the network must have a subnet that
// holds it; empty lets the engine choose when the container starts).
type Attachment struct {
	Network string   `json:"network"`
	Aliases []string `json:"aliases"`
	IPv4    string   `json:"ipv4,omitempty"`
}

// Container is everything a backend needs to create one container.
type Container struct {
	Name  string   `json:"name"`
	Image string   `json:"image"`
	Cmd   []string `json:"cmd"`
	// Entrypoint replaces the image's entrypoint (nil keeps it): a
	// user's workload image gets the launcher.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// NoHealthcheck turns off the image's HEALTHCHECK: Docker runs it
	// in the container beside the entrypoint, outside the launcher.
	NoHealthcheck bool              `json:"no_healthcheck,omitempty"`
	Env           []EnvVar          `json:"env"`
	User          string            `json:"user"`
	WorkingDir    string            `json:"working_dir,omitempty"`
	Labels        map[string]string `json:"labels"`
	// Networks: the first is the one the container is created on; the
	// rest are connected before it starts.
	Networks []Attachment `json:"networks"`

	ReadOnlyRootfs bool     `json:"read_only_rootfs"`
	CapDrop        []string `json:"cap_drop"`
	CapAdd         []string `json:"cap_add"`
	// NoNewPrivileges sets no_new_privs on the container's processes.
	NoNewPrivileges bool `json:"no_new_privileges"`
	// Seccomp is the seccomp profile (Docker's JSON profile format, the
	// text of seccomp-profile.json); "" is the runtime's default.
	Seccomp         string            `json:"seccomp,omitempty"`
	Tmpfs           map[string]string `json:"tmpfs"`
	Mounts          []Mount           `json:"mounts"`
	Init            bool              `json:"init"`
	CgroupnsPrivate bool              `json:"cgroupns_private"`
	PidsLimit       int64             `json:"pids_limit"`
	MemoryBytes     int64             `json:"memory_bytes"`
	MemorySwapBytes int64             `json:"memory_swap_bytes"`
	NanoCPUs        int64             `json:"nano_cpus"`
	Ulimits         []Ulimit          `json:"ulimits"`
	Sysctls         map[string]string `json:"sysctls"`
	DNS             []string          `json:"dns"`
	DNSOptions      []string          `json:"dns_options"`
	ExtraHosts      []string          `json:"extra_hosts"`
	// MaskedPaths, when not nil, replaces the engine's default list.
	MaskedPaths []string `json:"masked_paths"`
	// PidMode joins another container's pid namespace ("container:<id>"):
	// helpers only; empty is the container's own.
	PidMode     string        `json:"pid_mode,omitempty"`
	StopTimeout time.Duration `json:"stop_timeout_ns"`
}

// Resource is a container, network or volume found by its labels (what
// gc chooses from).
type Resource struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	// Subnets are a network's address ranges (CIDR); none for containers.
	Subnets []string `json:"subnets,omitempty"`
}
