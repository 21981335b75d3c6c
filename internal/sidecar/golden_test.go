//go:build linux

package sidecar

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// TestToolsListGolden pins what the sidecar advertises (tool names,
// descriptions, input schemas, the resource): the agent and any MCP client
// rely on it, so a change must be deliberate (go test -update).
func TestToolsListGolden(t *testing.T) {
	sc, err := New(Config{UpstreamURL: "http://127.0.0.1:1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := sc.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(map[string]any{"tools": tools.Tools, "resources": resources.Resources}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	testutil.Golden(t, filepath.Join("testdata", "surface.golden.json"), got) // the advertised surface
}
