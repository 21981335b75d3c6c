package sidecar

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
)

// addProxyTools registers the three Learn tools with their published
// schemas. The SDK validates arguments against the schema before the
// handler runs; the handler forwards only the declared arguments.
func (s *Sidecar) addProxyTools(srv *mcp.Server) {
	for _, t := range learn.Tools() {
		mcp.AddTool(srv, &mcp.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: t.Schema(),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(true)},
		}, s.proxyHandler(t))
	}
}

func ptr[T any](v T) *T { return &v }

func (s *Sidecar) proxyHandler(t learn.Tool) mcp.ToolHandlerFor[map[string]any, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		if s.cfg.NoUpstream {
			return nil, nil, ErrNoUpstream
		}
		args := make(map[string]any, len(t.Properties))
		for name := range t.Properties {
			if v, ok := in[name]; ok {
				args[name] = v
			}
		}
		if t.Name == learn.ToolDocsFetch {
			raw, _ := args["url"].(string)
			if err := checkFetchURL(raw, s.docsHost); err != nil {
				return nil, nil, err
			}
		}
		res, err := s.up.call(ctx, t.Name, args)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}, nil, nil
	}
}

// checkFetchURL admits only https URLs on the documentation host, on the
// default port, without credentials. The threat: microsoft_docs_fetch takes
// an arbitrary URL, so without this check the agent could make the upstream
// (or anything that follows its lead) fetch attacker-chosen hosts, or smuggle
// data out in a URL. The check runs before anything is sent.
func checkFetchURL(raw, docsHost string) error {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return fmt.Errorf("%s: url %q is not a valid absolute URL", learn.ToolDocsFetch, raw)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%s: refusing url %q: only https URLs are fetched (scheme is %q)", learn.ToolDocsFetch, raw, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%s: refusing url %q: credentials in URLs are not allowed", learn.ToolDocsFetch, raw)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host != docsHost {
		return fmt.Errorf("%s: refusing url %q: only pages on %s are fetched (host is %q)", learn.ToolDocsFetch, raw, docsHost, host)
	}
	if p := u.Port(); p != "" && p != "443" {
		return fmt.Errorf("%s: refusing url %q: only the default https port is allowed (port is %s)", learn.ToolDocsFetch, raw, p)
	}
	return nil
}
