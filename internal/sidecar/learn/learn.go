// Package learn is the published contract of the Microsoft Learn MCP server
// (https://learn.microsoft.com/api/mcp) that the sidecar proxies: the three
// tool names and the input schemas Microsoft publishes for them. The sidecar
// offers exactly these schemas to the agent and checks the upstream's
// tools/list against them; the fake upstream in learnfake serves them.
// It holds data only: it must not do I/O or import the MCP SDK.
package learn

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// DefaultEndpoint is the public Microsoft Learn MCP endpoint (streamable HTTP).
const DefaultEndpoint = "https://learn.microsoft.com/api/mcp"

// The proxied tool names, as Microsoft publishes them.
const (
	ToolDocsSearch       = "microsoft_docs_search"
	ToolDocsFetch        = "microsoft_docs_fetch"
	ToolCodeSampleSearch = "microsoft_code_sample_search"
)

// Tool is one published tool: its name, a description and its input schema.
type Tool struct {
	Name        string
	Description string
	// Properties maps each argument to its JSON type and description.
	Properties map[string]Property
	Required   []string
}

// Property is one argument of a [Tool].
type Property struct {
	Type        string
	Description string
}

// Tools returns the three published tools, in a stable order.
func Tools() []Tool {
	return []Tool{
		{
			Name:        ToolDocsSearch,
			Description: "Search official Microsoft Learn documentation. Returns up to 10 content chunks (title, excerpt, contentUrl) as JSON.",
			Properties: map[string]Property{
				"query": {Type: "string", Description: "A query or topic about Microsoft/Azure products, services, platforms, developer tools or technologies."},
			},
			Required: []string{"query"},
		},
		{
			Name:        ToolDocsFetch,
			Description: "Fetch a Microsoft Learn documentation page and return it as Markdown. Only https URLs on the documentation host are accepted.",
			Properties: map[string]Property{
				"url": {Type: "string", Description: "URL of the Microsoft documentation page to read."},
			},
			Required: []string{"url"},
		},
		{
			Name:        ToolCodeSampleSearch,
			Description: "Search official Microsoft Learn code samples. Returns snippets (description, codeSnippet, language, link) as JSON.",
			Properties: map[string]Property{
				"query":    {Type: "string", Description: "A descriptive query, SDK name, method name or code snippet related to Microsoft/Azure products."},
				"language": {Type: "string", Description: "Optional programming language filter, e.g. csharp, python, javascript, typescript, powershell."},
			},
			Required: []string{"query"},
		},
	}
}

// Lookup returns the published tool called name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Schema returns the tool's input schema as a JSON Schema object.
func (t Tool) Schema() map[string]any {
	props := make(map[string]any, len(t.Properties))
	for name, p := range t.Properties {
		props[name] = map[string]any{"type": p.Type, "description": p.Description}
	}
	return map[string]any{
		"type":       "object",
		"properties": props,
		"required":   slices.Clone(t.Required),
	}
}

// CheckSchema compares an input schema an upstream advertises (decoded JSON)
// with the published one. What counts is the contract a caller relies on:
// the set of argument names, each argument's type, and which are required.
// Descriptions and annotations may change freely. It returns nil when the
// contract holds, or an error naming every difference.
func (t Tool) CheckSchema(got map[string]any) error {
	var diffs []string
	if typ, _ := got["type"].(string); typ != "object" {
		diffs = append(diffs, fmt.Sprintf("type is %q, want \"object\"", typ))
	}
	gotProps, _ := got["properties"].(map[string]any)
	names := slices.Sorted(maps.Keys(t.Properties))
	for _, name := range names {
		raw, ok := gotProps[name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("argument %q is missing", name))
			continue
		}
		prop, _ := raw.(map[string]any)
		if typ, _ := prop["type"].(string); typ != t.Properties[name].Type {
			diffs = append(diffs, fmt.Sprintf("argument %q has type %q, want %q", name, typ, t.Properties[name].Type))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gotProps)) {
		if _, ok := t.Properties[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected argument %q", name))
		}
	}
	if gotReq, wantReq := requiredOf(got), sortedCopy(t.Required); !slices.Equal(gotReq, wantReq) {
		diffs = append(diffs, fmt.Sprintf("required is %v, want %v", gotReq, wantReq))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("input schema of %s differs from the published one: %s", t.Name, strings.Join(diffs, "; "))
	}
	return nil
}

func requiredOf(schema map[string]any) []string {
	list, _ := schema["required"].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}
