package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
)

// A model that adds keys, mistypes an argument, sends malformed JSON and
// calls an unknown tool gets each mistake back as a tool result, corrects
// itself, and the run succeeds; every refusal and every dropped key is in
// agent-turns.jsonl.
func TestRunSloppyModelRecovers(t *testing.T) {
	cfg, model, side := setup(t, fakemodel.Sloppy)
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v\nturns:\n%s", err, readFile(t, filepath.Join(cfg.OutputDir, TurnsFile)))
	}
	if got := model.Refused(); len(got) != 0 {
		t.Errorf("the fake refused requests the real service would refuse: %q", got)
	}
	var refused []string
	var ignored [][]string
	for _, tr := range readTurns(t, cfg.OutputDir) {
		if !tr.OK && tr.Kind == KindToolCall {
			refused = append(refused, tr.Error)
		}
		if len(tr.IgnoredArguments) > 0 {
			ignored = append(ignored, append([]string{tr.Tool}, tr.IgnoredArguments...))
		}
	}
	wantRefused := []string{
		`refused: malformed arguments for tool microsoft_code_sample_search: argument "query" must be string, got integer`,
		`refused: malformed arguments for tool microsoft_code_sample_search: the arguments are not a JSON object (got "{\"query\": \"HttpClient\", \"language\": csharp")`,
		`refused: unknown tool "search_web" (offered: read_answer_format, microsoft_code_sample_search, save_answer)`,
	}
	if diff := cmp.Diff(wantRefused, refused); diff != "" {
		t.Errorf("refused calls (-want +got):\n%s", diff)
	}
	wantIgnored := [][]string{{ToolReadFormat, "verbose"}, {ToolSaveAnswer, "answer"}}
	if diff := cmp.Diff(wantIgnored, ignored); diff != "" {
		t.Errorf("ignored arguments (-want +got):\n%s", diff)
	}
	if calls := side.Calls(); len(calls) != 2 {
		t.Errorf("sidecar got %d calls, want 2 (refused calls never reach it): %+v", len(calls), calls)
	}
}

// A model that keeps making calls the agent refuses ends the run, bounded,
// with the last reason; so does one that repeats a call.
func TestRunRefusalBudget(t *testing.T) {
	tests := []struct {
		behaviour fakemodel.Behaviour
		wantErr   string
		calls     int
	}{
		{fakemodel.UnknownTool, `5 tool calls in a row refused; last: unknown tool "run_shell"`, 5},
		{fakemodel.Malformed, "called microsoft_code_sample_search with the same arguments 3 times in a row (refused: malformed arguments", 2},
		{fakemodel.Loop, "same arguments 3 times in a row", 2},
	}
	for _, tt := range tests {
		t.Run(string(tt.behaviour), func(t *testing.T) {
			cfg, model, _ := setup(t, tt.behaviour)
			err := Run(context.Background(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run error = %v, want one containing %q", err, tt.wantErr)
			}
			if got := len(model.Requests()); got > tt.calls+1 {
				t.Errorf("model saw %d requests, want at most %d", got, tt.calls+1)
			}
			if got := model.Refused(); len(got) != 0 {
				t.Errorf("the fake refused requests the real service would refuse: %q", got)
			}
		})
	}
}

// A question of the user's own: the model may save at once, using no
// tool; the seed's steps are not required.
func TestRunCustomQuestionNoTools(t *testing.T) {
	cfg, model, side := setup(t, fakemodel.Direct)
	cfg.Question = "What is the capital of France?"
	var stdout bytes.Buffer
	if err := Run(context.Background(), cfg, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if stdout.String() != fakemodel.DirectAnswer {
		t.Errorf("stdout = %q, want %q", stdout.String(), fakemodel.DirectAnswer)
	}
	if calls := side.Calls(); len(calls) != 0 {
		t.Errorf("sidecar calls %+v, want none", calls)
	}
	if len(model.Refused()) != 0 {
		t.Errorf("contract refusals: %q", model.Refused())
	}
}

// The seed's task keeps its gate: saving before the steps is refused.
func TestRunSeedTaskGate(t *testing.T) {
	cfg, _, _ := setup(t, fakemodel.Direct)
	err := Run(context.Background(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
	want := "model stopped without calling save_answer (it was refused last: call read_answer_format first; call microsoft_code_sample_search first)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run error = %v, want one containing %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(cfg.OutputDir, AnswerFile)); !os.IsNotExist(err) {
		t.Errorf("answer.txt exists (stat err %v)", err)
	}
}

// A renamed tool's mapping is recorded on the first model turn.
func TestRunRecordsRenamedTools(t *testing.T) {
	cfg, _, _ := setup(t, fakemodel.Task)
	_, url := startSidecar(t, &mcp.Tool{Name: "learn.fetch", InputSchema: map[string]any{"type": "object"}})
	cfg.SidecarURL = url
	if err := Run(context.Background(), cfg, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	first := readTurns(t, cfg.OutputDir)[0]
	if diff := cmp.Diff(map[string]string{"learn_fetch": "learn.fetch"}, first.RenamedTools); first.Kind != KindModelRequest || diff != "" {
		t.Errorf("first turn %+v: renamed tools (-want +got):\n%s", first, diff)
	}
}
