//go:build linux

package sidecar

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLocalSurfaceInMemory drives the local tool and resource over the
// SDK's in-memory transports, with auditing into a buffer.
func TestLocalSurfaceInMemory(t *testing.T) {
	var buf bytes.Buffer
	sc, err := New(Config{UpstreamURL: "http://127.0.0.1:1/mcp", Audit: NewAuditLog(&buf)})
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

	tests := []struct {
		name    string
		run     func() (string, error)
		want    string
		wantErr string
	}{
		{"tool returns the element", func() (string, error) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolHTMLElementName})
			if err != nil {
				return "", err
			}
			return resultText(res), nil
		}, HTMLElementName, ""},
		{"resource is the answer format", func() (string, error) {
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: AnswerFormatURI})
			if err != nil {
				return "", err
			}
			return res.Contents[0].Text, nil
		}, AnswerFormat(), ""},
		{"unknown resource", func() (string, error) {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcp-sidecar://nope"})
			return "", err
		}, "", "not found"},
		{"tool rejects arguments", func() (string, error) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolHTMLElementName, Arguments: map[string]any{"x": 1}})
			if err != nil {
				return "", err
			}
			return resultText(res), nil
		}, "validating", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.run()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	var lines []string
	starts := 0
	for i, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if decodeRecord(t, i+1, []byte(l)).Kind == KindCallStart {
			starts++ // one before each tools/call
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) != len(tests) || starts != 2 {
		t.Fatalf("audit has %d end lines and %d call_start lines, want %d and 2:\n%s", len(lines), starts, len(tests), buf.String())
	}
	oks := []bool{true, true, false, false}
	for i, l := range lines {
		r := decodeRecord(t, i+1, []byte(l))
		if r.OK != oks[i] {
			t.Errorf("line %d ok = %v, want %v: %s", i+1, r.OK, oks[i], l)
		}
	}
}

func TestAnswerFormatContent(t *testing.T) {
	for _, want := range []string{"direct answer", "code sample", "Source", "learn.microsoft.com"} {
		if !strings.Contains(AnswerFormat(), want) {
			t.Errorf("answer format lacks %q", want)
		}
	}
}
