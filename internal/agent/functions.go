package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/chatcontract"
)

// validToolName is what the Chat Completions API accepts as a function name.
var validToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// invalidNameChar is any character a function name may not hold.
var invalidNameChar = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// function is one MCP tool as the model sees it.
type function struct {
	tool   *mcp.Tool
	name   string // the name offered to the model
	schema toolSchema
}

// offer turns the sidecar's tools into function definitions the Chat
// Completions API accepts (issue 13): a schema without "properties" (or
// without a type) gets them, a name the API refuses is mapped to one it
// takes (reversibly: the map is keyed by the offered name), a description
// over the API's 1024 characters is cut. taken holds the names already
// offered; a tool that would exceed the API's 128 tools is left out and
// named in dropped.
func offer(tools []*mcp.Tool, taken map[string]bool, room int) (fns []function, dropped []string, err error) {
	for _, tool := range tools {
		if len(fns) >= room {
			dropped = append(dropped, tool.Name)
			continue
		}
		schema, err := functionSchema(tool.InputSchema)
		if err != nil {
			return nil, nil, fmt.Errorf("schema of sidecar tool %s: %w", tool.Name, err)
		}
		name := functionName(tool.Name, taken)
		taken[name] = true
		fns = append(fns, function{tool: tool, name: name, schema: schema})
	}
	return fns, dropped, nil
}

// definition is the function definition sent to the model.
func (f function) definition() openai.Tool {
	return openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: f.name, Description: boundDescription(f.tool.Description), Parameters: f.schema.raw}}
}

// functionName keeps a valid, free name; otherwise it replaces what the API
// refuses with "_" and, when that is too long or taken, keeps a prefix and
// adds a hash of the original, so two tools never share a name.
func functionName(name string, taken map[string]bool) string {
	if validToolName.MatchString(name) && !taken[name] {
		return name
	}
	clean := invalidNameChar.ReplaceAllString(name, "_")
	if clean != "" && len(clean) <= 64 && !taken[clean] {
		return clean
	}
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%.55s_%s", clean, hex.EncodeToString(sum[:4]))
}

// boundDescription cuts a description to the API's limit, in characters.
func boundDescription(d string) string {
	if utf8.RuneCountInString(d) <= chatcontract.MaxDescription {
		return d
	}
	r := []rune(d)
	return string(r[:chatcontract.MaxDescription-1]) + "…"
}

// toolSchema is the part of a tool's input schema the agent checks calls
// against, and the repaired schema itself.
type toolSchema struct {
	raw        json.RawMessage
	properties map[string]json.RawMessage
	required   []string
	// closed: keys outside properties are not the tool's (additionalProperties
	// absent or false); they are dropped from a call, and recorded.
	closed bool
}

// functionSchema repairs an MCP input schema into one the API takes: an
// object schema that declares its properties.
func functionSchema(in any) (toolSchema, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return toolSchema{}, fmt.Errorf("encoding: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	if _, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
	}
	var props map[string]json.RawMessage
	if json.Unmarshal(m["properties"], &props) != nil || props == nil {
		props = map[string]json.RawMessage{}
		m["properties"] = json.RawMessage(`{}`)
	}
	s := toolSchema{properties: props, closed: true}
	json.Unmarshal(m["required"], &s.required)
	if ap, ok := m["additionalProperties"]; ok && strings.TrimSpace(string(ap)) != "false" {
		s.closed = false
	}
	if s.raw, err = json.Marshal(m); err != nil {
		return toolSchema{}, fmt.Errorf("encoding: %w", err)
	}
	return s, nil
}

// mustSchema is functionSchema for the agent's own schemas.
func mustSchema(raw string) toolSchema {
	s, err := functionSchema(json.RawMessage(raw))
	if err != nil {
		panic(err)
	}
	return s
}
