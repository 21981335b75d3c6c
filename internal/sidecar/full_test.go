//go:build linux

package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/mcpfake"
)

// lastLine is the audit file's last line, decoded.
func lastLine(t *testing.T, path string) (Record, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var r Record
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last audit line %q: %v", lines[len(lines)-1], err)
	}
	return r, len(lines)
}

// callRefused calls tool and fails t unless the sidecar refused it for
// its audit log (with want in the error as well).
func callRefused(t *testing.T, cs *mcp.ClientSession, tool, want string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"query": "q"}})
	if err == nil || !strings.Contains(err.Error(), ReasonAuditFull) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s = %+v, %v; want refused: %s (%s)", tool, res, err, ReasonAuditFull, want)
	}
}

// TestAuditFullRefusesCalls: when a call's start line no longer fits the
// audit log's budget, the call is refused and never reaches its MCP
// server; the log ends with one log_full line naming it, every later
// call is refused too, and Serve reports the full log.
func TestAuditFullRefusesCalls(t *testing.T) {
	docs, docsURL := startMCPFake(t, mcpfake.Options{Name: "docs", Tools: docsTools("Search the docs.")})
	path := filepath.Join(t.TempDir(), AuditFileName)
	audit, err := OpenAuditLog(path)
	if err != nil {
		t.Fatal(err)
	}
	ts := startSidecar(t, Config{Audit: audit, Servers: []ServerConfig{{Name: "docs", URL: docsURL, Tools: []string{"search"}}}})
	ts.auditFull = true
	cs := connect(t, ts.URL, "")
	if _, isErr := callText(t, cs, "search", map[string]any{"query": "before"}); isErr {
		t.Fatal("the call before the log filled failed")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	audit.SetBudget(fi.Size() + 10)
	callRefused(t, cs, "search", "budget")
	callRefused(t, cs, "search", "budget")
	if n := len(docs.Calls()); n != 1 {
		t.Errorf("docs saw %d calls, want only the one before the log filled", n)
	}
	last, n := lastLine(t, path)
	if last.Kind != KindLogFull || !last.LogFull || !strings.HasPrefix(last.Error, ReasonAuditFull) || !strings.Contains(last.Error, `"search"`) {
		t.Errorf("last line %+v, want the log_full line naming the lost call_start", last)
	}
	if err := ts.stop(); !errors.Is(err, ErrAuditFull) {
		t.Errorf("Serve = %v, want %v", err, ErrAuditFull)
	}
	if _, n2 := lastLine(t, path); n2 != n {
		t.Errorf("the log grew after its log_full line: %d lines, then %d", n, n2)
	}
}

// brokenWriter fails every write, as a file does after EIO.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, syscall.EIO }

// TestAuditWriteErrorRefusesCalls: a start line that cannot be written
// (a write error, not the budget) refuses the call as well.
func TestAuditWriteErrorRefusesCalls(t *testing.T) {
	docs, docsURL := startMCPFake(t, mcpfake.Options{Name: "docs", Tools: docsTools("Search the docs.")})
	ts := startSidecar(t, Config{Audit: NewAuditLog(brokenWriter{}), Servers: []ServerConfig{{Name: "docs", URL: docsURL, Tools: []string{"search"}}}})
	ts.auditFull = true
	cs := connect(t, ts.URL, "")
	callRefused(t, cs, "search", "input/output error")
	if n := len(docs.Calls()); n != 0 {
		t.Errorf("docs saw %d calls, want none", n)
	}
}
