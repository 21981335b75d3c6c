//go:build linux

package roles

import (
	"context"
	"errors"
	"os"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
)

// agentOptions are the flags of `mcpsidecar agent`.
type agentOptions struct {
	agent.Options
	check bool
}

// agentLong is the agent's help.
const agentLong = `agent answers the question with an OpenAI-compatible model and the MCP sidecar's
tools, saves the answer to /sandbox-output/answer.txt and prints exactly that text.
It refuses to run outside the sandbox container (SANDBOX_AGENT_CONTAINER=1 and a
writable /sandbox-output); on the host, use "mcpsidecar run".

With --check it runs no model and needs no key: it lists the sidecar's tools,
reads the answer format, confirms the gateway refuses a .invalid name and that
the container has no default route, and prints a table (used by doctor).

Environment: MCP_SIDECAR_URL, OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL,
MCPSIDECAR_QUESTION, HTTP_PROXY, HTTPS_PROXY, NO_PROXY, and for --check
MCPSIDECAR_ENGINE_VERSION (engines before 25 give --internal networks a gateway).`

func agentCmd(ctx context.Context, args []string, s Streams) error {
	var o agentOptions
	f := newFlags("agent [flags]", agentLong, s)
	f.StringVar(&o.Model, "model", "", "model name (default $OPENAI_MODEL, else "+agent.DefaultModel+")")
	f.StringVar(&o.Question, "question", "", "the question (default $MCPSIDECAR_QUESTION, else the seed's HttpClient question)")
	f.IntVar(&o.MaxTurns, "max-turns", agent.DefaultMaxTurns, "most model turns before giving up")
	f.DurationVar(&o.RequestTimeout, "request-timeout", agent.DefaultRequestTimeout, "timeout of each model request and tool call")
	f.BoolVar(&o.check, "check", false, "run the connectivity check instead of a model")
	if err := f.noArgs(args); err != nil {
		return err
	}
	return runAgent(ctx, o, s, os.Getenv)
}

// agentOutputDir is the container's output mount; tests point it elsewhere.
var agentOutputDir = agent.DefaultOutputDir

// runAgent guards, configures, then runs the workload or the check.
func runAgent(ctx context.Context, o agentOptions, s Streams, getenv func(string) string) error {
	if err := agent.CheckSandbox(getenv, agentOutputDir); err != nil {
		return withHint(exitUsage, err, "run the agent through: mcpsidecar run")
	}
	o.OutputDir = agentOutputDir
	cfg, err := agent.LoadConfig(o.Options, getenv)
	if err != nil {
		return withCode(exitUsage, err)
	}
	// The agent never runs unhardened: without a policy it refuses.
	err = agent.Serve(ctx, agent.ServeConfig{Config: cfg, Check: o.check, Stdout: s.Out, Stderr: s.Err}, func() error {
		return hardenRole(ctx, "agent", getenv, s.Err, true, agentOutputDir)
	})
	if errors.Is(err, agent.ErrMissingKey) {
		return withHint(exitUsage, err, "the harness forwards OPENAI_API_KEY from the host")
	}
	return err
}
