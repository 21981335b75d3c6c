package spec

// Spec is a validated sandbox_spec.toml. Lists keep the spec's order.
type Spec struct {
	// Source names where the spec came from (a path, or "<default>").
	Source        string   `json:"-"`
	SchemaVersion int      `json:"schema_version"`
	Capabilities  []string `json:"capabilities"`
	// AllowedDomains and AllowedIPs are as written in the spec; the
	// normalised forms are in [Profile.Gateway].
	AllowedDomains []string `json:"allowed_domains"`
	AllowedIPs     []string `json:"allowed_ip_addresses"`
	Env            []EnvVar `json:"environment_variables"`
	// Credentials are the [[credentials]] entries, as validated (the
	// openai_agents default is added by [Resolve], not here).
	Credentials []Credential `json:"credentials,omitempty"`
	// CredentialsInSandbox puts the real values in the agent's
	// environment (a recorded softening) instead of the gateway's.
	CredentialsInSandbox bool `json:"credentials_in_sandbox,omitempty"`
	// AgentTelemetry asks the gateway to relay the agent's own
	// OpenTelemetry to the host's collector (a recorded softening).
	AgentTelemetry bool `json:"agent_telemetry,omitempty"`
	// AgentTelemetryLine is the spec's line that sets agent_telemetry (0:
	// not set there), for a refusal that names it.
	AgentTelemetryLine int `json:"-"`
	// MCPServers are the [[mcp_servers]] entries, as validated; see
	// [Spec.Servers] for the default.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// Workload is the [workload] table: the image and command run
	// instead of the built-in agent (nil: the built-in agent).
	Workload *Workload `json:"workload,omitempty"`
	// HardeningBestEffort are the in-container hardening layers the spec
	// accepts to run without where the engine's kernel cannot enforce
	// them (hardening_best_effort), recorded as degradations.
	HardeningBestEffort []string `json:"hardening_best_effort,omitempty"`
	// Warnings are things accepted but worth saying (`spec check` prints
	// them): an entry read differently from how it was written.
	Warnings []Problem `json:"-"`
}

// EnvVar is one [[environment_variables]] entry: exactly one of a literal
// Value or FromHost.
type EnvVar struct {
	Name     string `json:"name"`
	Value    string `json:"value,omitempty"`
	FromHost bool   `json:"from_host,omitempty"`
}

// Has reports whether the spec grants capability c.
func (s *Spec) Has(c string) bool {
	for _, x := range s.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}
