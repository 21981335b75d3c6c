// Package agent is the sandbox's workload: an OpenAI tool-calling loop
// (Chat Completions, through github.com/sashabaranov/go-openai) that answers
// one question using the MCP sidecar, saves the answer to the output
// directory and prints exactly that text. It also holds the built-in
// connectivity check that `mcpsidecar doctor` runs instead of a model.
// The host's preflight and verdict over an agent run are in
// internal/verdict, which imports this package's names.
//
// The agent runs only inside the sandbox container. Its [LoadConfig] is the
// one place that reads the environment:
//
//	SANDBOX_AGENT_CONTAINER  must be "1" (with /sandbox-output a writable dir)
//	MCP_SIDECAR_URL          streamable-HTTP MCP endpoint of the sidecar
//	OPENAI_API_KEY           sent only as the model API's bearer token
//	OPENAI_BASE_URL          any OpenAI-compatible /v1 endpoint (default OpenAI)
//	OPENAI_MODEL             model name (default [DefaultModel])
//	MCPSIDECAR_QUESTION      the question (default [DefaultQuestion])
//	HTTP_PROXY, HTTPS_PROXY, NO_PROXY  the egress gateway; read once, explicitly
//	MCPSIDECAR_ENGINE_VERSION  Docker Engine version (--check: before 25,
//	                         --internal networks have a default route)
//
// Toward the model it keeps the Chat Completions contract as OpenAI
// enforces it (every MCP tool offered as a function definition the API
// accepts), takes tool calls the way robust agent frameworks do (unknown
// keys dropped, a wrong call answered with what was wrong, a bounded budget
// of refused and repeated calls), and reports model errors in the
// service's or the gateway's own words; every step is a line of
// agent-turns.jsonl.
//
// What it must not do: execute anything the model says (the model can only
// pick one of a fixed set of tools, whose arguments are checked), write
// outside the output directory, or record the API key anywhere. It does not
// install restrictions itself; the role command applies internal/harden
// before calling [Run].
package agent
