package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// The whole in-process chain: fake model -> agent -> the real sidecar ->
// fake Learn upstream, all on loopback. The run directory it leaves passes
// the host verdict, and one trace-id joins the agent's turn, the sidecar's
// audit line and the upstream request.
func TestRunThroughSidecar(t *testing.T) {
	learn := learnfake.New(learnfake.Options{})
	up := httptest.NewServer(learn.Handler())
	t.Cleanup(up.Close)
	runDir := t.TempDir()
	audit, err := sidecar.OpenAuditLog(filepath.Join(runDir, runs.FileAudit))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sidecar.New(sidecar.Config{UpstreamURL: up.URL + "/mcp", Audit: audit, UpstreamTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Connect upstream first, as Serve does at start.
	if _, err := sc.CheckUpstream(context.Background()); err != nil {
		t.Fatalf("CheckUpstream: %v", err)
	}
	side := httptest.NewServer(sc.Handler())
	t.Cleanup(side.Close)
	model, _ := fakemodel.New(fakemodel.Task, agent.TestKey)
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)

	env := map[string]string{agent.EnvSidecarURL: side.URL + sidecar.MCPPath, agent.EnvBaseURL: ms.URL + "/v1", agent.EnvAPIKey: agent.TestKey}
	cfg, err := agent.LoadConfig(agent.Options{OutputDir: runDir, RequestTimeout: 10 * time.Second}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := agent.Run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v (stderr %q)\nturns:\n%s", err, stderr.String(), agent.ReadFile(t, filepath.Join(runDir, agent.TurnsFile)))
	}
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, runs.FileStdout), stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if rc := verdict.CheckRunExit(runDir, 0, cfg.Question); !rc.OK {
		t.Errorf("verdict not OK: %+v", rc.Checks)
	}

	searchID := ""
	for _, tr := range agent.ReadTurns(t, runDir) {
		if tr.Kind == agent.KindToolCall && tr.Tool == agent.ToolCodeSampleSearch {
			searchID = tr.CorrelationID
		}
	}
	var audited []string
	for _, line := range strings.Split(strings.TrimSpace(agent.ReadFile(t, filepath.Join(runDir, runs.FileAudit))), "\n") {
		var rec struct {
			Kind          string `json:"kind"`
			Name          string `json:"name"`
			CorrelationID string `json:"correlation_id"`
		}
		json.Unmarshal([]byte(line), &rec)
		// One id per call: the call's end line, not its call_start line.
		if rec.Name == agent.ToolCodeSampleSearch && rec.Kind != sidecar.KindCallStart {
			audited = append(audited, rec.CorrelationID)
		}
	}
	var upstream []string
	for _, c := range learn.Calls() {
		if c.Tool == agent.ToolCodeSampleSearch {
			upstream = append(upstream, agent.TraceIDOf(c.Traceparent))
			if c.Arguments["language"] != "csharp" {
				t.Errorf("upstream search arguments %v, want language csharp", c.Arguments)
			}
		}
	}
	want := []string{searchID}
	if diff := cmp.Diff(want, audited); diff != "" {
		t.Errorf("audit correlation ids (-agent +sidecar):\n%s", diff)
	}
	if diff := cmp.Diff(want, upstream); diff != "" {
		t.Errorf("upstream trace ids (-agent +upstream):\n%s", diff)
	}
}
