package sidecar

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Local surface: served by the sidecar itself, no upstream involved.
const (
	// ToolHTMLElementName is the seed's sample tool.
	ToolHTMLElementName = "get_html_element_name"
	// HTMLElementName is what [ToolHTMLElementName] returns: "<table>", the
	// hard-coded element of the seed family's sidecar (its earlier workload
	// wrote a page explaining this element).
	HTMLElementName = "<table>"
	// AnswerFormatURI is the resource the agent must read before answering.
	AnswerFormatURI = "mcp-sidecar://instructions/answer-format.md"
)

// htmlElementName serves [ToolHTMLElementName]; any argument is refused.
func htmlElementName(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := noArguments(req.Params.Arguments); err != nil {
		res := &mcp.CallToolResult{}
		res.SetError(err)
		return res, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: HTMLElementName}}}, nil
}

// noArguments accepts absent, null or empty-object arguments only.
func noArguments(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return fmt.Errorf("validating \"arguments\": %s takes an object of no arguments: %v", ToolHTMLElementName, err)
	}
	if len(args) > 0 {
		return fmt.Errorf("validating \"arguments\": %s takes no arguments, got %d", ToolHTMLElementName, len(args))
	}
	return nil
}

//go:embed answer-format.md
var answerFormat string

// AnswerFormat returns the Markdown served at [AnswerFormatURI].
func AnswerFormat() string { return answerFormat }

func addLocal(s *mcp.Server) {
	// A raw handler rather than mcp.AddTool: the typed path decodes the
	// arguments twice through the SDK's JSON decoder (32 KiB buffer each)
	// for a tool that takes none; the check below is all it needs.
	s.AddTool(&mcp.Tool{
		Name:        ToolHTMLElementName,
		Description: "Return the HTML element the sample workload should explain. Takes no arguments.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, htmlElementName)
	s.AddResource(&mcp.Resource{
		URI:         AnswerFormatURI,
		Name:        "answer-format",
		Title:       "Answer format",
		Description: "The Markdown format the agent's final answer must follow. Read it before composing the answer.",
		MIMEType:    "text/markdown",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: AnswerFormatURI, MIMEType: "text/markdown", Text: answerFormat,
		}}}, nil
	})
}
