// Package agentenv names the variables the agent role reads: the model's,
// forwarded from the host, and the ones the host sets in its container.
// The agent owns them (internal/agent re-exports them as EnvAPIKey,
// EnvBaseURL, EnvModel, EnvInSandbox, EnvSidecarURL and EnvQuestion); they live in
// this leaf so that the host's spec compiler, which the agent itself
// imports, can import them too instead of spelling them again. It
// imports nothing.
package agentenv

// The model variables openai_agents forwards from the host to the agent.
const (
	// APIKey is the model API's key, sent only as its bearer token (the
	// only secret of the three).
	APIKey = "OPENAI_API_KEY"
	// BaseURL is any OpenAI-compatible /v1 endpoint.
	BaseURL = "OPENAI_BASE_URL"
	// Model is the model name.
	Model = "OPENAI_MODEL"
)

// The variables the host sets in the agent's container.
const (
	// InSandbox must be "1": the agent runs only in its container.
	InSandbox = "SANDBOX_AGENT_CONTAINER"
	// SidecarURL is the sidecar's streamable-HTTP MCP endpoint.
	SidecarURL = "MCP_SIDECAR_URL"
	// Question is the question the agent answers (the --question flag
	// overrides it).
	Question = "MCPSIDECAR_QUESTION"
)
