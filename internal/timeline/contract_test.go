package timeline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestProducersContract writes each source with its producer's own types
// and writers and checks the join reads them: a renamed field on either
// side fails here, not in a reviewer's empty report.
func TestProducersContract(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	id := "4bf92f3577b34da6a3ce929d0e0e4736"
	exit0 := 0
	meta := runs.Metadata{Schema: runs.MetadataSchema, RunID: "run-c", Command: "test-sandbox", Started: start,
		Finished: start.Add(3 * time.Second), ExitCode: 0,
		Containers:  []runs.Container{{Role: "agent", Name: "run-c-agent", ExitCode: &exit0}},
		Phases:      []runs.Phase{{Name: "wait", Start: start, DurationMS: 2000, OK: true}},
		Verdict:     runs.Verdict{OK: true},
		Credentials: []runs.Credential{{Variable: "OPENAI_API_KEY", Host: "api.openai.com", Lives: spec.LivesGateway}}}
	writeJSONFile(t, dir, FileRunMetadata, meta)

	var audit bytes.Buffer
	al := sidecar.NewAuditLog(&audit)
	al.Write(sidecar.Record{Time: start.Add(time.Second).Format(time.RFC3339Nano), SessionID: "s", Kind: sidecar.KindToolCall,
		Name: "microsoft_code_sample_search", Arguments: json.RawMessage(`{"query":"q"}`), OK: true, CorrelationID: id})
	writeBytes(t, dir, FileAudit, audit.Bytes())

	var decisions bytes.Buffer
	dl := egress.NewDecisionLog(&decisions)
	if err := dl.Record(egress.Decision{Time: start.Add(900 * time.Millisecond), Method: "CONNECT", Host: "learn.microsoft.com",
		Port: 443, Decision: egress.Allow, Rule: "learn.microsoft.com", CorrelationID: id,
		Scope: egress.Scope{Role: egress.RoleSidecar, Server: "learn", Tool: "microsoft_code_sample_search"}.String()}); err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, FileDecisions, decisions.Bytes())

	turn, err := json.Marshal(agent.Turn{Time: start.Add(500 * time.Millisecond).Format(time.RFC3339Nano), Turn: 1,
		Kind: agent.KindModelRequest, Model: "m", ToolsRequested: []string{"microsoft_code_sample_search"}, OK: true})
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, FileAgentTurns, append(turn, '\n'))

	c := probe.Capability{ID: "P1", Title: "metadata", Tool: probe.Result{Outcome: probe.Allowed},
		Expected: "Denied", Verdict: probe.Violation, VerdictReason: "the tool path yielded Allowed"}
	report := &probe.Report{Groups: []probe.Group{{ID: "G1", Title: "Network", Capabilities: []probe.Capability{c}}}}
	data, err := report.Encode(false)
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, FileProbeReport, data)

	tl, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Problems) != 0 {
		t.Fatalf("problems: %v", tl.Problems)
	}
	if want := []CredentialInfo{{Variable: "OPENAI_API_KEY", Host: "api.openai.com", Lives: CredentialInGateway}}; !slices.Equal(tl.Credentials, want) {
		t.Errorf("credentials %+v, want %+v", tl.Credentials, want)
	}
	var call, egressEv *Event
	for i := range tl.Events {
		switch tl.Events[i].Kind {
		case KindToolCall:
			call = &tl.Events[i]
		case KindEgress:
			egressEv = &tl.Events[i]
		}
	}
	switch {
	case call == nil || egressEv == nil:
		t.Fatalf("call %v egress %v: a source was not read", call, egressEv)
	case egressEv.Parent != call.Seq || egressEv.Port != "443" || call.CorrelationID != id:
		t.Errorf("egress parent %d port %q, call id %q; want %d 443 %s", egressEv.Parent, egressEv.Port, call.CorrelationID, call.Seq, id)
	}
	if s := tl.Stats(); s.ModelRequests != 1 {
		t.Errorf("model requests %d, want 1", s.ModelRequests)
	}
	if tl.Probe == nil || len(tl.Probe.Groups) != 1 {
		t.Fatalf("probe report not read: %+v", tl.Probe)
	}
	got := tl.Probe.Groups[0].Probes[0]
	if got.Class() != ClassViolation || got.Outcome != string(probe.Allowed) || got.Expected != "Denied" {
		t.Errorf("probe %+v: want a violation, outcome Allowed, expected Denied", got)
	}
}

func writeJSONFile(t *testing.T, dir, name string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, name, data)
}

func writeBytes(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
