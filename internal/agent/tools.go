package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"
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

// validToolName is what the Chat Completions API accepts as a function name.
var validToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// errFatal marks a model mistake that ends the run: an unknown tool,
// malformed arguments, an oversized answer. They are not sent back to the
// model to try again, because a model that does them once tends to loop.
var errFatal = errors.New("model error")

// toolset is the fixed set of tools offered to the model, and the state
// the run's preconditions need. Nothing else can be called.
type toolset struct {
	session    *mcp.ClientSession
	remote     map[string]*mcp.Tool
	offered    []openai.Tool
	cfg        Config
	log        *turnLog
	formatRead bool
	searched   bool
	answer     *string
	// refused is why save_answer was last refused, for the final error.
	refused string
}

// newToolset lists the sidecar's tools and builds the offer. A sidecar tool
// whose name clashes with a local one, or that the model API would refuse,
// is left out.
func newToolset(ctx context.Context, s *mcp.ClientSession, cfg Config, log *turnLog) (*toolset, error) {
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing sidecar tools: %w", err)
	}
	t := &toolset{session: s, remote: map[string]*mcp.Tool{}, cfg: cfg, log: log}
	t.offered = append(t.offered, localTool(ToolReadFormat,
		"Read the required answer format (Markdown). Call this first.",
		`{"type":"object","properties":{},"additionalProperties":false}`))
	for _, tool := range res.Tools {
		if tool.Name == ToolReadFormat || tool.Name == ToolSaveAnswer || !validToolName.MatchString(tool.Name) {
			continue
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("encoding schema of sidecar tool %s: %w", tool.Name, err)
		}
		t.remote[tool.Name] = tool
		t.offered = append(t.offered, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: tool.Name, Description: tool.Description, Parameters: json.RawMessage(schema)}})
	}
	t.offered = append(t.offered, localTool(ToolSaveAnswer,
		"Save the complete final answer text, exactly as it should be shown. Call once, last.",
		`{"type":"object","properties":{"text":{"type":"string","description":"the complete answer"}},"required":["text"],"additionalProperties":false}`))
	return t, nil
}

func localTool(name, desc, schema string) openai.Tool {
	return openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: name, Description: desc, Parameters: json.RawMessage(schema)}}
}

// names lists the offered tool names, for error messages.
func (t *toolset) names() []string {
	var out []string
	for _, o := range t.offered {
		out = append(out, o.Function.Name)
	}
	return out
}

// call runs one tool call of the model and returns the text for the model.
// A returned error wraps errFatal when it must end the run.
func (t *toolset) call(ctx context.Context, turn int, tc openai.ToolCall) (string, error) {
	name := tc.Function.Name
	if tc.Type != "" && tc.Type != openai.ToolTypeFunction {
		return "", fmt.Errorf("%w: tool call %s has type %q, want function", errFatal, tc.ID, tc.Type)
	}
	args, err := parseArgs(name, tc.Function.Arguments)
	if err != nil {
		return "", err
	}
	switch _, remote := t.remote[name]; {
	case name == ToolReadFormat:
		return t.readFormat(ctx, turn, args)
	case name == ToolSaveAnswer:
		return t.save(turn, args)
	case remote:
		return t.callRemote(ctx, turn, name, args)
	}
	return "", fmt.Errorf("%w: model called unknown tool %q (offered: %s)", errFatal, name, strings.Join(t.names(), ", "))
}

// parseArgs decodes a tool call's arguments, which must be a JSON object.
func parseArgs(name, raw string) (map[string]any, error) {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
		return nil, fmt.Errorf("%w: malformed arguments for tool %s: want a JSON object, got %.200q", errFatal, name, raw)
	}
	return args, nil
}

// readFormat reads the answer-format resource from the sidecar.
func (t *toolset) readFormat(ctx context.Context, turn int, args map[string]any) (string, error) {
	if len(args) != 0 {
		return "", fmt.Errorf("%w: malformed arguments for tool %s: it takes none, got %s", errFatal, ToolReadFormat, keys(args))
	}
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
	t.record(turn, ToolReadFormat, id, start, err)
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
func (t *toolset) save(turn int, args map[string]any) (string, error) {
	text, ok := args["text"].(string)
	if !ok || len(args) != 1 {
		return "", fmt.Errorf("%w: malformed arguments for tool %s: want exactly {\"text\": string}, got %s", errFatal, ToolSaveAnswer, keys(args))
	}
	if missing := t.missingSteps(); missing != "" {
		t.refused = missing
		t.record(turn, ToolSaveAnswer, "", time.Now(), errors.New("refused: "+missing))
		return "error: not saved: " + missing, nil
	}
	start := time.Now()
	if err := saveAnswer(t.cfg.OutputDir, text, t.cfg.MaxAnswerBytes); err != nil {
		t.logTurn(Turn{Turn: turn, Kind: KindAnswerSaved, Tool: ToolSaveAnswer, DurationMS: ms(time.Since(start)), Error: err.Error()})
		return "", fmt.Errorf("%w: saving the answer: %w", errFatal, err)
	}
	t.logTurn(Turn{Turn: turn, Kind: KindAnswerSaved, Tool: ToolSaveAnswer, DurationMS: ms(time.Since(start)), OK: true})
	t.answer = &text
	return "saved", nil
}

// missingSteps names what the task requires before saving, or "".
func (t *toolset) missingSteps() string {
	var miss []string
	if !t.formatRead {
		miss = append(miss, "call "+ToolReadFormat+" first")
	}
	if _, ok := t.remote[ToolCodeSampleSearch]; ok && !t.searched {
		miss = append(miss, "call "+ToolCodeSampleSearch+" first")
	}
	return strings.Join(miss, "; ")
}

// callRemote calls a sidecar tool with a fresh trace-id.
func (t *toolset) callRemote(ctx context.Context, turn int, name string, args map[string]any) (string, error) {
	if err := checkRequired(t.remote[name], args); err != nil {
		return "", fmt.Errorf("%w: malformed arguments for tool %s: %w", errFatal, name, err)
	}
	id := newTraceID()
	ctx, cancel := context.WithTimeout(withTrace(ctx, id), t.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	res, err := t.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err == nil && res.IsError {
		err = errors.New(firstLine(toolText(res)))
	}
	t.record(turn, name, id, start, err)
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

// checkRequired checks that args has every property the schema requires.
// Types are the sidecar's to check; it answers a wrong one with a tool error.
func checkRequired(tool *mcp.Tool, args map[string]any) error {
	raw, err := json.Marshal(tool.InputSchema)
	if err != nil {
		return fmt.Errorf("encoding schema: %w", err)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		return fmt.Errorf("decoding schema: %w", err)
	}
	for _, r := range schema.Required {
		if _, ok := args[r]; !ok {
			return fmt.Errorf("missing required argument %q", r)
		}
	}
	return nil
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

// record logs one tool_call turn.
func (t *toolset) record(turn int, tool, id string, start time.Time, err error) {
	tr := Turn{Turn: turn, Kind: KindToolCall, Tool: tool, CorrelationID: id, DurationMS: ms(time.Since(start)), OK: err == nil}
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

func keys(m map[string]any) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return "[" + strings.Join(ks, ", ") + "]"
}
