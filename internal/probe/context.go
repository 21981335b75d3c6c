package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"slices"
)

// ContextSchema is the value of [Context.Schema].
const ContextSchema = "mcpsidecar.probe-context/v1"

// ContextEnv is the environment variable through which the harness passes
// the JSON of a [Context] to `mcpsidecar probe` in the agent container.
const ContextEnv = "MCPSIDECAR_PROBE_CONTEXT"

// Context is what the spec declares about the sandbox the probe runs in: the
// probes measure, the context says what the measurement should be. The
// harness (test-sandbox) writes it as JSON into MCPSIDECAR_PROBE_CONTEXT.
// Every field is optional; [Context.withDefaults] fills the values of the
// default sandbox (README.md), so `{}` describes the default spec.
//
// The probe suite prefers these fixtures, which the harness may put in the
// image (the probe never creates anything outside its writable paths):
//   - DeniedDirectory/denied/denied.txt and DeniedDirectory/denied/.hidden,
//     readable by Unix permissions but outside every Landlock rule.
//
// When DeniedDirectory does not exist, the denied-directory probes use the
// root directory "/" (outside every Landlock rule, read-only in the
// sandbox) and its "/.dockerenv" as the known file; a probe whose fixture
// is still missing is "unsupported", never "pass".
//
// The probe creates AllowedDirectory/allowed/{allowed.txt,.hidden} itself.
type Context struct {
	Schema string `json:"schema,omitempty"`

	// Capabilities are the spec's capabilities (e.g. "network",
	// "openai_agents", "mcp_client", "shell_access"); they change what some
	// probes are expected to yield (shell_access: process spawning allowed).
	Capabilities []string `json:"capabilities"`
	// AllowedDomains and AllowedIPs are the gateway's allowlist as resolved
	// (normalised domain rules and CIDRs). A probe never contacts an
	// allowlisted target: that traffic would leave the machine.
	AllowedDomains []string `json:"allowed_domains"`
	AllowedIPs     []string `json:"allowed_ip_addresses"`

	// GatewayURL is the egress proxy ("http://egress-gateway:3128"); empty
	// means the sandbox has none (no network capability).
	GatewayURL string `json:"gateway_url"`
	// SidecarURL is the MCP endpoint ("http://mcp-sidecar:8000/mcp"); its
	// /healthz must answer 200 from the agent container.
	SidecarURL string `json:"sidecar_url"`

	// Directories, as in the seed's CapabilityContext.
	WorkingDirectory     string `json:"working_directory"`      // default /sandbox-work
	AllowedDirectory     string `json:"allowed_directory"`      // default /sandbox-work/allowed
	DeniedDirectory      string `json:"denied_directory"`       // default /sandbox-denied
	OutputDirectory      string `json:"output_directory"`       // default /sandbox-output
	RuntimeUserDirectory string `json:"runtime_user_directory"` // default /home/sandbox
	RuntimeTempDirectory string `json:"runtime_temp_directory"` // default /tmp

	// WritablePaths are the only directories the workload may write to;
	// the G40 writable-paths probe fails on any other writable directory.
	WritablePaths []string `json:"writable_paths"`

	// Limits are the resource limits the container was started with
	// (0 = not declared: the probe then only checks that a limit exists).
	Limits Limits `json:"limits"`

	// HostAddresses are the host's own addresses on the networks the
	// agent is attached to (its bridge addresses), which the harness knows
	// and the container may not. Unset means the probe computes them: the
	// first host address of each subnet the container is on (Docker's
	// gateway address) and the next hop of each route. The G41 probes
	// send to these addresses only; each must be a loopback or private
	// address, so a wrong list can never aim a probe off the machine.
	HostAddresses []string `json:"host_addresses,omitempty"`

	// BlackholedHosts must resolve (through /etc/hosts) to an unroutable
	// address only.
	BlackholedHosts []string `json:"blackholed_hosts"`

	// DeniedDomain is a name the gateway must refuse before any lookup. It
	// must be under a reserved TLD (.invalid, .test, .example).
	DeniedDomain string `json:"denied_domain"`
	// DNSExfiltrationDomain is resolved through the system resolver; it
	// must be under a reserved TLD so no real query leaves.
	DNSExfiltrationDomain string `json:"dns_exfiltration_domain"`

	// Credentials are the spec's credentials as the harness placed them in
	// this run, by variable name (never a value). A credential that lives
	// in the gateway leaves only the run's placeholder in its variable
	// ([IsPlaceholder]); one that lives in the sandbox (credentials_in_sandbox,
	// or the Squid engine) is a recorded softening, so its variable's value
	// is not a finding. Unset: no credential may be in the sandbox at all.
	Credentials []CredentialPlace `json:"credentials,omitempty"`
	// SpecVariables are the names the spec's [[environment_variables]] put
	// in the agent's environment on purpose: G05 T05 lists them by name
	// and does not judge their values, which are the spec's choice.
	SpecVariables []string `json:"spec_variables,omitempty"`

	// Context-driven targets of the seed's catalogue ("C" probes): unset
	// means N/A (verdict unsupported). Only loopback and private addresses
	// are ever contacted.
	AllowedLocalAddress  string `json:"allowed_local_address,omitempty"`
	DeniedLocalAddress   string `json:"denied_local_address,omitempty"`
	MountedSharedDir     string `json:"mounted_shared_directory,omitempty"`
	ContainerRuntimeSock string `json:"container_runtime_socket,omitempty"`
	SSHAgentSocket       string `json:"ssh_agent_socket,omitempty"`
}

// CredentialPlace is one credential of the run and where it lives; the
// same JSON as the run-metadata.json "credentials" entries.
type CredentialPlace struct {
	Variable string `json:"variable"`
	Host     string `json:"host,omitempty"`
	Lives    string `json:"lives"` // LivesGateway or LivesSandbox
}

// Where a credential lives, in [CredentialPlace.Lives].
const (
	LivesGateway = "gateway"
	LivesSandbox = "sandbox"
)

// Limits are declared container resource limits.
type Limits struct {
	Pids          int64 `json:"pids,omitempty"`            // --pids-limit
	MemoryBytes   int64 `json:"memory_bytes,omitempty"`    // --memory
	FileSizeBytes int64 `json:"file_size_bytes,omitempty"` // --ulimit fsize
	NoFile        int64 `json:"nofile,omitempty"`          // --ulimit nofile
}

// ParseContext decodes and validates a context; empty input is the default
// context. Unknown fields are refused so a typo cannot silently drop an
// expectation.
func ParseContext(data []byte) (*Context, error) {
	c := &Context{}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c); err != nil {
			return nil, fmt.Errorf("decoding probe context: %w", err)
		}
	}
	c.withDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("probe context: %w", err)
	}
	return c, nil
}

// DefaultContext is the context of the default spec.
func DefaultContext() *Context {
	c := &Context{}
	c.withDefaults()
	return c
}

func (c *Context) withDefaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Schema, ContextSchema)
	def(&c.WorkingDirectory, "/sandbox-work")
	def(&c.AllowedDirectory, path.Join(c.WorkingDirectory, "allowed"))
	def(&c.DeniedDirectory, "/sandbox-denied")
	def(&c.OutputDirectory, "/sandbox-output")
	def(&c.RuntimeUserDirectory, "/home/sandbox")
	def(&c.RuntimeTempDirectory, "/tmp")
	def(&c.DeniedDomain, "probe-denied.invalid")
	def(&c.DNSExfiltrationDomain, "c2FuZGJveC10ZXN0ZXI.probe-exfil.invalid")
	if c.WritablePaths == nil {
		c.WritablePaths = []string{"/tmp", c.WorkingDirectory, c.OutputDirectory}
	}
	if c.BlackholedHosts == nil {
		c.BlackholedHosts = []string{"host.docker.internal", "gateway.docker.internal",
			"kubernetes.docker.internal", "metadata.google.internal"}
	}
}

func (c *Context) validate() error {
	if c.Schema != ContextSchema {
		return fmt.Errorf("schema %q: want %q", c.Schema, ContextSchema)
	}
	for _, n := range []struct{ key, name string }{
		{"denied_domain", c.DeniedDomain},
		{"dns_exfiltration_domain", c.DNSExfiltrationDomain},
	} {
		if !reservedName(n.name) {
			// Threat: a probe that resolves or requests a real name sends
			// traffic off the machine.
			return fmt.Errorf("%s %q: must be under .invalid, .test or .example", n.key, n.name)
		}
	}
	for _, a := range c.HostAddresses {
		addr, err := netip.ParseAddr(a)
		if err != nil || !localAddr(addr) || addr.IsUnspecified() || addr.IsMulticast() {
			// Threat: a probe aimed at an address off the machine.
			return fmt.Errorf("host_addresses %q: must be a loopback or private unicast address", a)
		}
	}
	for _, cp := range c.Credentials {
		if cp.Variable == "" || (cp.Lives != LivesGateway && cp.Lives != LivesSandbox) {
			return fmt.Errorf("credentials %+v: want a variable and lives %q or %q", cp, LivesGateway, LivesSandbox)
		}
	}
	for _, p := range append([]string{c.WorkingDirectory, c.AllowedDirectory, c.DeniedDirectory,
		c.OutputDirectory, c.RuntimeUserDirectory, c.RuntimeTempDirectory}, c.WritablePaths...) {
		if !path.IsAbs(p) {
			return fmt.Errorf("directory %q: must be an absolute path", p)
		}
	}
	return nil
}

// Has reports whether the spec declares capability name.
func (c *Context) Has(name string) bool { return slices.Contains(c.Capabilities, name) }

// ShellAccess reports whether the spec grants process spawning.
func (c *Context) ShellAccess() bool { return c.Has("shell_access") || c.Has("anthropic_claude") }

// openAIFamily are the capabilities that forward OPENAI_API_KEY (seed 1.4).
var openAIFamily = []string{"openai", "openai_agents", "otto_agent", "ibm_beeai", "google_adk",
	"langchain", "langgraph", "microsoft_agent", "crewai"}

// ForwardsModelKey reports whether the spec grants a model provider (the
// model API must be reachable). Since issue 15 the key itself stays in the
// gateway unless [Context.Credentials] says it lives in the sandbox.
func (c *Context) ForwardsModelKey() bool {
	for _, n := range append(openAIFamily, "anthropic_python", "anthropic_claude") {
		if c.Has(n) {
			return true
		}
	}
	return false
}

// livesIn returns where the credential carried by variable name lives,
// or "" when the spec declares no credential in it.
func (c *Context) livesIn(name string) string {
	for _, cp := range c.Credentials {
		if cp.Variable == name {
			return cp.Lives
		}
	}
	return ""
}
