package spec

import (
	"github.com/mcpsidecar/mcpsidecar/internal/harden/hardenpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// ProfileSchema is the value of [Profile.Schema].
const ProfileSchema = "mcpsidecar.resolved-profile/v1"

// Role names: the keys of [Profile.Containers]. The probe suite runs in
// the agent's container with the agent's hardening (see [Profile.Probe]).
const (
	RoleGateway = "gateway"
	RoleSidecar = "sidecar"
	RoleAgent   = "agent"
	RoleProbe   = "probe" // only as hardenpolicy.Policy.Role and Cmd of [Profile.Probe]
)

// Network names used in [Container.Networks]. The harness maps them to the
// per-run Docker networks: "internal" is created with --internal (no route
// out); "egress" is a bridge with a route out that only the gateway joins.
const (
	NetInternal = "internal"
	NetEgress   = "egress"
)

// Capability names accepted in a spec.
const (
	CapNetwork      = "network"
	CapMCPClient    = "mcp_client"
	CapOpenAIAgents = "openai_agents"
	CapShellAccess  = "shell_access"
)

// Aliases and ports the roles reach each other by (docs/architecture.md, Topology of one run).
const (
	GatewayAlias = "egress-gateway"
	GatewayPort  = 3128
	SidecarAlias = "mcp-sidecar"
	SidecarPort  = 8000
	SidecarURL   = "http://mcp-sidecar:8000/mcp"
	ProxyURL     = "http://egress-gateway:3128"
	// OutputDir is where each container's own run-directory mount lands
	// (the only writable host path, read-write).
	OutputDir = "/sandbox-output"
	// WorkDir is a noexec tmpfs scratch directory.
	WorkDir = "/sandbox-work"
)

// User is the unprivileged uid:gid every role runs as (the "nonroot"
// convention of distroless images; no host account uses it).
const User = "65532:65532"

// Profile is a spec resolved into everything each layer enforces. It is
// produced by [Resolve] and is pure data: building it touches nothing.
// Secrets never appear in it: host-sourced variables are names only.
type Profile struct {
	Schema string `json:"schema"` // [ProfileSchema]

	// Spec is the validated spec; SpecJSON its normalised JSON (the seed's
	// algorithm: sorted keys, no whitespace, ASCII-only) and SpecHash the
	// first 16 hex digits of its SHA-256.
	Spec     *Spec  `json:"spec"`
	SpecJSON string `json:"-"`
	SpecHash string `json:"spec_hash"`

	// Capabilities are the spec's capabilities, de-duplicated and sorted.
	Capabilities []string `json:"capabilities"`

	// Roles lists the containers of a run in start order: "gateway" only
	// with network, "sidecar" only with mcp_client, "agent" always.
	Roles []string `json:"roles"`
	// Containers holds one entry per name in Roles.
	Containers map[string]Container `json:"containers"`

	// Gateway is the egress policy (gateway-policy.json); nil without
	// network, when the agent has no network at all.
	Gateway *netpolicy.Config `json:"gateway,omitempty"`

	// SeccompProfile is the Docker seccomp profile JSON (indented, as
	// written to seccomp-profile.json). Each container's SecurityOpt
	// carries the compact form.
	SeccompProfile []byte `json:"-"`
	// SquidConf is squid.conf carrying the same rules as Gateway, for
	// when Squid is the selected gateway engine; empty without network.
	SquidConf string `json:"-"`
	// Dockerfile is the runtime image's Dockerfile (see [Dockerfile]).
	Dockerfile string `json:"-"`

	// Credentials are the run's credentials (openai_agents' default
	// included) and where each lives: the gateway, or the sandbox when
	// credentials_in_sandbox asks for it.
	Credentials []ResolvedCredential `json:"credentials"`

	// Ledger says, for each capability, exactly what it opened and where.
	Ledger []Softening `json:"softening_ledger"`
}

// Softening is one entry of the ledger: Capability opened What in Layer
// (one of the Layer* constants).
type Softening struct {
	Capability string `json:"capability"`
	Layer      string `json:"layer"`
	What       string `json:"what"`
}

// Layers named in the ledger.
const (
	LayerTopology = "topology"   // which containers and networks exist
	LayerEgress   = "egress"     // the gateway's allowlist
	LayerEnv      = "env"        // variables forwarded from the host
	LayerLandlock = "landlock"   // in-container Landlock rules
	LayerSpawn    = "no-spawn"   // the execve/execveat filter
	LayerDocker   = "container"  // docker run options
	LayerCreds    = "credential" // where each credential lives
	LayerKernel   = "kernel"     // in-container layers the engine's kernel may lack
)

// Container is how the harness creates one role's container (all roles
// run the same image; see [ImageTag]). Field names follow Docker's
// container and host config so the mapping is one-to-one.
type Container struct {
	Role string `json:"role"`
	// Name is the container's role-specific name stem; the harness adds
	// the run id ("mcp-sidecar-<run>", "sandbox-agent-<run>", ...).
	Name string `json:"name"`
	// Cmd are the arguments after the image's ENTRYPOINT (/mcpsidecar).
	Cmd []string `json:"cmd"`
	// Env is the static, non-secret environment (NAME -> value),
	// including MCPSIDECAR_HARDEN_POLICY (the JSON of Harden).
	Env map[string]string `json:"env"`
	// ForwardEnv names host variables whose values the cli copies in at
	// run time (omitted when unset on the host). Never recorded.
	ForwardEnv []string `json:"forward_env"`

	User           string   `json:"user"` // [User]
	ReadonlyRootfs bool     `json:"readonly_rootfs"`
	CapDrop        []string `json:"cap_drop"`
	CapAdd         []string `json:"cap_add"`
	// NoNewPrivileges and Seccomp (the compact profile JSON) are the
	// role's security as data, what the plan carries to each backend.
	NoNewPrivileges bool   `json:"-"`
	Seccomp         string `json:"-"`
	// SecurityOpt is the same security in Docker's option form
	// ("no-new-privileges:true", "seccomp=<compact profile JSON>"), as
	// resolved-profile.json records it; nothing reads it back.
	SecurityOpt []string `json:"security_opt"`
	// Tmpfs maps mount path to options (always noexec,nosuid,nodev).
	Tmpfs map[string]string `json:"tmpfs"`

	Memory     int64    `json:"memory_bytes"`
	MemorySwap int64    `json:"memory_swap_bytes"` // equal to Memory: no swap
	NanoCPUs   int64    `json:"nano_cpus"`
	PidsLimit  int64    `json:"pids_limit"`
	Ulimits    []Ulimit `json:"ulimits"`

	Sysctls map[string]string `json:"sysctls"`
	// ExtraHosts are "name:address" entries that black-hole host and
	// metadata names (the threat: reaching the Docker host or a cloud
	// metadata service by name).
	ExtraHosts []string `json:"extra_hosts"`
	// MaskedPaths is the complete list: setting it replaces Docker's
	// default list, so it repeats Docker's defaults.
	MaskedPaths  []string `json:"masked_paths"`
	CgroupnsMode string   `json:"cgroupns_mode"` // "private"

	// Harden is what the role applies to itself before any work.
	Harden hardenpolicy.Policy `json:"harden"`

	// Networks are [NetInternal] / [NetEgress]; empty means network mode
	// "none". Aliases are the container's names on NetInternal.
	Networks []string `json:"networks"`
	Aliases  []string `json:"aliases"`
	// OutputDir is where the role's own output directory is mounted.
	OutputDir string `json:"output_dir"`
}

// Ulimit is one resource limit, as Docker's API takes it.
type Ulimit struct {
	Name string `json:"name"`
	Soft int64  `json:"soft"`
	Hard int64  `json:"hard"`
}
