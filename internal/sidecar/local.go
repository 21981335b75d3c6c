package sidecar

import (
	"context"
	_ "embed"

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

//go:embed answer-format.md
var answerFormat string

// AnswerFormat returns the Markdown served at [AnswerFormatURI].
func AnswerFormat() string { return answerFormat }

func addLocal(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolHTMLElementName,
		Description: "Return the HTML element the sample workload should explain. Takes no arguments.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: HTMLElementName}}}, nil, nil
	})
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
