package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/chatcontract"
)

// Names of the tools the agent offers besides the sidecar's own.
const (
	ToolReadFormat = "read_answer_format"
	ToolSaveAnswer = "save_answer"
	// ToolCodeSampleSearch is the sidecar tool the task requires.
	ToolCodeSampleSearch = "microsoft_code_sample_search"
	// AnswerFormatURI is the sidecar resource read by [ToolReadFormat].
	AnswerFormatURI = "mcp-sidecar://instructions/answer-format.md"
	// maxToolResult caps what one tool result feeds back to the model.
	maxToolResult = 32 << 10
)

// errFatal marks a model mistake that ends the run: an oversized answer,
// or a spent budget of refused or repeated calls. A single wrong call is
// not fatal: it goes back to the model as a tool result saying what was
// wrong, so it can correct itself.
var errFatal = errors.New("model error")

// Schemas of the agent's own tools.
var (
	readFormatSchema = mustSchema(`{"type":"object","properties":{},"additionalProperties":false}`)
	saveSchema       = mustSchema(`{"type":"object","properties":{"text":{"type":"string","description":"the complete answer"}},"required":["text"],"additionalProperties":false}`)
)

// toolset is the fixed set of tools offered to the model, and the state
// the run's preconditions need. Nothing else can be called.
type toolset struct {
	session    *mcp.ClientSession
	remote     map[string]function // by the name offered to the model
	offered    []openai.Tool
	renamed    map[string]string // offered name -> MCP name, for the record
	dropped    []string          // sidecar tools over the API's tool limit
	cfg        Config
	log        *turnLog
	formatRead bool
	searched   bool
	answer     *string
	// refused is why save_answer was last refused, for the final error.
	refused string
}

// newToolset lists the sidecar's tools and builds the offer: the local
// tools around the sidecar's, each a function definition the API accepts.
// A sidecar tool whose name clashes with a local one is left out.
func newToolset(ctx context.Context, s *mcp.ClientSession, cfg Config, log *turnLog) (*toolset, error) {
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing sidecar tools: %w", err)
	}
	t := &toolset{session: s, remote: map[string]function{}, renamed: map[string]string{}, cfg: cfg, log: log}
	taken := map[string]bool{ToolReadFormat: true, ToolSaveAnswer: true}
	var sidecarTools []*mcp.Tool
	for _, tool := range res.Tools {
		if !taken[tool.Name] {
			sidecarTools = append(sidecarTools, tool)
		}
	}
	fns, dropped, err := offer(sidecarTools, taken, chatcontract.MaxTools-2)
	if err != nil {
		return nil, err
	}
	t.dropped = dropped
	t.offered = append(t.offered, localTool(ToolReadFormat, "Read the required answer format (Markdown). Call this first.", readFormatSchema))
	for _, f := range fns {
		t.remote[f.name] = f
		if f.name != f.tool.Name {
			t.renamed[f.name] = f.tool.Name
		}
		t.offered = append(t.offered, f.definition())
	}
	t.offered = append(t.offered, localTool(ToolSaveAnswer,
		"Save the complete final answer text, exactly as it should be shown. Call once, last.", saveSchema))
	return t, nil
}

func localTool(name, desc string, schema toolSchema) openai.Tool {
	return openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: name, Description: desc, Parameters: schema.raw}}
}

// names lists the offered tool names, for error messages.
func (t *toolset) names() []string {
	var out []string
	for _, o := range t.offered {
		out = append(out, o.Function.Name)
	}
	return out
}

// schemaOf returns the schema of an offered tool.
func (t *toolset) schemaOf(name string) (toolSchema, bool) {
	switch name {
	case ToolReadFormat:
		return readFormatSchema, true
	case ToolSaveAnswer:
		return saveSchema, true
	}
	f, ok := t.remote[name]
	return f.schema, ok
}

// call runs one tool call of the model and returns the text for the model.
// A call the agent refuses (unknown tool, malformed or mistyped arguments,
// save_answer before the task's steps) is answered with what was wrong and
// recorded; refused says why. A returned error ends the run.
func (t *toolset) call(ctx context.Context, turn int, tc openai.ToolCall) (out, refused string, err error) {
	name := tc.Function.Name
	schema, known := t.schemaOf(name)
	switch {
	case tc.Type != "" && tc.Type != openai.ToolTypeFunction:
		return t.refuse(turn, name, fmt.Sprintf("tool call %s has type %q, want function", tc.ID, tc.Type))
	case !known:
		return t.refuse(turn, name, fmt.Sprintf("unknown tool %q (offered: %s)", capName(name), strings.Join(t.names(), ", ")))
	}
	args, ignored, err := callArgs(schema, tc.Function.Arguments)
	if err != nil {
		return t.refuse(turn, name, fmt.Sprintf("malformed arguments for tool %s: %v", name, err))
	}
	switch name {
	case ToolReadFormat:
		out, err = t.readFormat(ctx, turn, ignored)
		return out, "", err
	case ToolSaveAnswer:
		return t.save(turn, args, ignored)
	}
	out, err = t.callRemote(ctx, turn, t.remote[name], args, ignored)
	return out, "", err
}

// refuse records a refused call and tells the model what to fix.
func (t *toolset) refuse(turn int, name, reason string) (string, string, error) {
	t.logTurn(Turn{Turn: turn, Kind: KindToolCall, Tool: capName(name), Error: "refused: " + reason})
	return "error: " + reason + ". Correct the call and try again.", reason, nil
}

// capName bounds a model-chosen name before it reaches a log or an error.
func capName(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// readFormat reads the answer-format resource from the sidecar.
func (t *toolset) readFormat(ctx context.Context, turn int, ignored []string) (string, error) {
	id := newTraceID()
	ctx, cancel := context.WithTimeout(withTrace(ctx, id), t.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	res, err := t.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: AnswerFormatURI})
	text := ""
	if err == nil {
		text = resourceText(res)
		if text == "" {
			err = fmt.Errorf("resource %s is empty", AnswerFormatURI)
		}
	}
	t.record(Turn{Turn: turn, Tool: ToolReadFormat, CorrelationID: id, IgnoredArguments: ignored}, start, err)
	if err != nil {
		return "error: reading the answer format: " + err.Error(), nil
	}
	t.formatRead = true
	return capText(text), nil
}

func resourceText(res *mcp.ReadResourceResult) string {
	var b strings.Builder
	for _, c := range res.Contents {
		b.WriteString(c.Text)
	}
	return b.String()
}

// save checks the run's preconditions and writes the answer.
func (t *toolset) save(turn int, args map[string]any, ignored []string) (string, string, error) {
	text := args["text"].(string) // callArgs checked it is a string
	if missing := t.missingSteps(); missing != "" {
		t.refused = missing
		return t.refuse(turn, ToolSaveAnswer, "not saved: "+missing)
	}
	start := time.Now()
	tr := Turn{Turn: turn, Kind: KindAnswerSaved, Tool: ToolSaveAnswer, IgnoredArguments: ignored}
	if err := saveAnswer(t.cfg.OutputDir, text, t.cfg.MaxAnswerBytes); err != nil {
		tr.DurationMS, tr.Error = ms(time.Since(start)), err.Error()
		t.logTurn(tr)
		return "", "", fmt.Errorf("%w: saving the answer: %w", errFatal, err)
	}
	tr.DurationMS, tr.OK = ms(time.Since(start)), true
	t.logTurn(tr)
	t.answer = &text
	return "saved", "", nil
}

// missingSteps names what the seed's task requires before saving, or "".
// A question of the user's own has no required steps: the model may use
// whichever tools it chooses, or none.
func (t *toolset) missingSteps() string {
	if !t.cfg.SeedTask() {
		return ""
	}
	var miss []string
	if !t.formatRead {
		miss = append(miss, "call "+ToolReadFormat+" first")
	}
	if t.hasRemote(ToolCodeSampleSearch) && !t.searched {
		miss = append(miss, "call "+ToolCodeSampleSearch+" first")
	}
	return strings.Join(miss, "; ")
}

// hasRemote reports whether the sidecar offers the MCP tool name.
func (t *toolset) hasRemote(name string) bool {
	for _, f := range t.remote {
		if f.tool.Name == name {
			return true
		}
	}
	return false
}

// callRemote calls a sidecar tool, by its MCP name, with a fresh trace-id.
func (t *toolset) callRemote(ctx context.Context, turn int, f function, args map[string]any, ignored []string) (string, error) {
	name := f.tool.Name
	id := newTraceID()
	ctx, cancel := context.WithTimeout(withTrace(ctx, id), t.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	res, err := t.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err == nil && res.IsError {
		err = errors.New(firstLine(toolText(res)))
	}
	tr := Turn{Turn: turn, Tool: name, CorrelationID: id, IgnoredArguments: ignored}
	if f.name != name {
		tr.OfferedAs = f.name
	}
	t.record(tr, start, err)
	if name == ToolCodeSampleSearch && err == nil {
		t.searched = true
	}
	switch {
	case res != nil && res.IsError:
		return "tool error: " + capText(toolText(res)), nil
	case err != nil:
		return "error: calling " + name + ": " + err.Error(), nil
	}
	return capText(toolText(res)), nil
}

func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	return strings.Join(parts, "\n")
}

// record logs one tool_call turn, started at start.
func (t *toolset) record(tr Turn, start time.Time, err error) {
	tr.Kind, tr.DurationMS, tr.OK = KindToolCall, ms(time.Since(start)), err == nil
	if err != nil {
		tr.Error = err.Error()
	}
	t.logTurn(tr)
}

func (t *toolset) logTurn(tr Turn) {
	tr.Model = t.cfg.Model
	t.log.add(tr)
}

// capText bounds what goes back to the model, so a huge upstream result
// cannot blow the context window or the memory limit.
func capText(s string) string {
	if s == "" {
		return "(empty result)" // the API refuses a tool message without content
	}
	if len(s) <= maxToolResult {
		return s
	}
	return s[:maxToolResult] + fmt.Sprintf("\n[truncated: %d more bytes]", len(s)-maxToolResult)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}
