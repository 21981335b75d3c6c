package dockerx

import (
	"encoding/json"
	"time"
)

// Redacted replaces a secret value wherever a [ContainerSpec] is written out.
const Redacted = "<redacted>"

// NetworkSpec describes one network to create.
type NetworkSpec struct {
	Name     string            `json:"name"`
	Internal bool              `json:"internal"` // no route out of the host
	Labels   map[string]string `json:"labels"`
	// Options are the bridge driver's options, e.g. OptionInhibitIPv4.
	Options map[string]string `json:"options,omitempty"`
	// Subnet (CIDR) and Gateway (an address in it) are the network's IPv4
	// addresses; empty leaves the choice to the engine's default pools.
	// The engine reserves Gateway even when OptionInhibitIPv4 keeps the
	// host from taking it.
	Subnet  string `json:"subnet,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// OptionInhibitIPv4 keeps the host from taking an IPv4 address on a bridge
// network. Threat: the host owns an internal network's gateway address, and
// Docker filters only forwarded traffic, so a container could reach every
// host service listening on 0.0.0.0 through it (TCP, UDP, ICMP).
const OptionInhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

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

// Mount is a bind mount of a host path.
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

// ContainerSpec is everything the engine needs to create one container.
type ContainerSpec struct {
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

	ReadOnlyRootfs  bool              `json:"read_only_rootfs"`
	CapDrop         []string          `json:"cap_drop"`
	CapAdd          []string          `json:"cap_add"`
	SecurityOpt     []string          `json:"security_opt"`
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

// Resource is a container or network found by label.
type Resource struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	// Subnets are a network's address ranges (CIDR); none for containers.
	Subnets []string `json:"subnets,omitempty"`
}

// ContainerState is what the harness needs to know about a container.
type ContainerState struct {
	Running bool
	Pid     int // of the container's init, in the engine's pid namespace; 0 when not running
	// Created is when the engine created the container, by its clock.
	Created   time.Time
	ExitCode  int
	OOMKilled bool
	// IPs maps network name to the container's IPv4 address on it.
	IPs map[string]string
}

// EngineVersion identifies the daemon.
type EngineVersion struct {
	Version    string `json:"version"`
	APIVersion string `json:"api_version"`
	// Podman is set when the API is Podman's Docker-compatible one
	// (a component named Podman Engine): Version is then Podman's own.
	Podman bool `json:"podman,omitempty"`
	// Arch and OS are the engine's machine and system in Go's names
	// ("amd64", "linux"): the role binary must be built for them.
	Arch string `json:"arch,omitempty"`
	OS   string `json:"os,omitempty"`
}

// ImageInfo describes an image present on the engine.
type ImageInfo struct {
	ID   string `json:"id"`
	Size int64  `json:"size"`
	// Entrypoint and Cmd are the image's own (a workload image run
	// without a command runs them under the launcher).
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// Volumes are the paths the image declares VOLUME (sorted): the
	// engine mounts an anonymous volume at each in every container of it.
	Volumes []string `json:"volumes,omitempty"`
}

// File is one regular file of an image (a build context or a root filesystem).
type File struct {
	Name string // path inside the image, without a leading slash
	Mode int64
	Data []byte
}

// ImageFiles is what an image is made from, two equivalent ways: the
// Dockerfile and build context the classic builder runs, and the same files
// laid out as a root filesystem plus the Dockerfile's USER and ENTRYPOINT as
// import changes, for the builder-less path.
type ImageFiles struct {
	Tag        string
	Dockerfile []byte
	Context    []File // build context, besides the Dockerfile
	RootFS     []File // the image's files at their final paths
	Changes    []string
	Labels     map[string]string
}
