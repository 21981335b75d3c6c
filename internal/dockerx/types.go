package dockerx

import (
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/plan"
)

// The plan's types (internal/plan), as this adapter takes them.
type (
	NetworkSpec   = plan.Network
	EnvVar        = plan.EnvVar
	Mount         = plan.Mount
	Ulimit        = plan.Ulimit
	Attachment    = plan.Attachment
	ContainerSpec = plan.Container
	Resource      = plan.Resource
)

// Redacted replaces a secret value wherever a [ContainerSpec] is written out.
const Redacted = plan.Redacted

// OptionInhibitIPv4 keeps the host from taking an IPv4 address on a bridge
// network. Threat: the host owns an internal network's gateway address, and
// Docker filters only forwarded traffic, so a container could reach every
// host service listening on 0.0.0.0 through it (TCP, UDP, ICMP).
const OptionInhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

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
