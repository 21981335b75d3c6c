package agent

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

	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
)

const testKey = "sk-test-fake-key-0123456789"

// setup starts a fake model playing b and the fake sidecar, and returns a
// config pointing the agent at both.
func setup(t testing.TB, b fakemodel.Behaviour) (Config, *fakemodel.Server, *fakeSidecar) {
	t.Helper()
	model, err := fakemodel.New(b, testKey)
	if err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	side, sideURL := startSidecar(t)
	env := map[string]string{EnvSidecarURL: sideURL, EnvBaseURL: ms.URL + "/v1", EnvAPIKey: testKey}
	cfg, err := LoadConfig(Options{OutputDir: t.TempDir(), RequestTimeout: 5 * time.Second}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.RetryBase = time.Millisecond
	return cfg, model, side
}

func TestRunTask(t *testing.T) {
	cfg, model, side := setup(t, fakemodel.Task)
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v (stderr %q)", err, stderr.String())
	}
	want := fakemodel.Answer(testFormat, testSample)
	got, err := os.ReadFile(filepath.Join(cfg.OutputDir, AnswerFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("answer.txt mismatch (-want +got):\n%s", cmp.Diff(want, string(got)))
	}
	if stdout.String() != want && stdout.String() != want+"\n" {
		t.Errorf("stdout = %q, want the saved answer %q", stdout.String(), want)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want empty", stderr.String())
	}
	turns := readTurns(t, cfg.OutputDir)
	wantKinds := []string{KindModelRequest, KindToolCall, KindModelRequest, KindToolCall, KindModelRequest, KindAnswerSaved}
	if diff := cmp.Diff(wantKinds, kinds(turns)); diff != "" {
		t.Errorf("turn kinds mismatch (-want +got):\n%s", diff)
	}
	checkModelCorrelation(t, turns, model.Requests())
	checkToolCorrelation(t, turns, side.Calls())
}

// checkModelCorrelation: each model_request line's id is the trace-id of
// the traceparent the model received, and the key never is in the log.
func checkModelCorrelation(t *testing.T, turns []Turn, reqs []fakemodel.Request) {
	t.Helper()
	var ids, sent []string
	for _, tr := range turns {
		if tr.Kind == KindModelRequest {
			ids = append(ids, tr.CorrelationID)
		}
	}
	for _, r := range reqs {
		sent = append(sent, traceIDOf(r.Traceparent))
		if r.Authorization != "Bearer "+testKey {
			t.Errorf("model got Authorization %q", r.Authorization)
		}
	}
	if diff := cmp.Diff(ids, sent); diff != "" {
		t.Errorf("model correlation ids (-turn log +received):\n%s", diff)
	}
}

func checkToolCorrelation(t *testing.T, turns []Turn, calls []sidecarCall) {
	t.Helper()
	var ids, sent []string
	for _, tr := range turns {
		if tr.Kind == KindToolCall {
			ids = append(ids, tr.CorrelationID)
		}
	}
	for _, c := range calls {
		sent = append(sent, traceIDOf(c.Traceparent))
	}
	if diff := cmp.Diff(ids, sent); diff != "" {
		t.Errorf("tool correlation ids (-turn log +sidecar):\n%s", diff)
	}
	if len(calls) != 2 || calls[0].Name != AnswerFormatURI || calls[1].Name != ToolCodeSampleSearch ||
		!strings.Contains(calls[1].Arguments, `"language":"csharp"`) {
		t.Errorf("sidecar calls = %+v, want the format read then a csharp code-sample search", calls)
	}
}

// traceIDOf extracts the trace-id from a traceparent, checking its shape.
func traceIDOf(tp string) string {
	p := strings.Split(tp, "-")
	if len(p) != 4 || p[0] != "00" || len(p[1]) != 32 || len(p[2]) != 16 {
		return "malformed:" + tp
	}
	return p[1]
}

func TestRunMisbehavingModels(t *testing.T) {
	tests := []struct {
		behaviour fakemodel.Behaviour
		maxTurns  int
		wantErr   string
	}{
		{fakemodel.UnknownTool, 0, `unknown tool "run_shell"`},
		{fakemodel.Malformed, 0, "malformed arguments for tool microsoft_code_sample_search"},
		{fakemodel.Loop, 0, "same arguments 3 times in a row"},
		{fakemodel.Loop, 2, "no answer saved within 2 turns"},
		{fakemodel.Oversized, 0, "over the 65536-byte cap"},
		{fakemodel.NeverSave, 0, "model stopped without calling save_answer"},
	}
	for _, tt := range tests {
		t.Run(string(tt.behaviour), func(t *testing.T) {
			cfg, _, _ := setup(t, tt.behaviour)
			if tt.maxTurns > 0 {
				cfg.MaxTurns = tt.maxTurns
			}
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), cfg, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run error = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := os.Stat(filepath.Join(cfg.OutputDir, AnswerFile)); !os.IsNotExist(err) {
				t.Errorf("answer.txt exists after a failed run (stat err %v)", err)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing printed", stdout.String())
			}
			turns := readTurns(t, cfg.OutputDir)
			if last := turns[len(turns)-1]; last.Kind != KindError || !strings.Contains(last.Error, tt.wantErr) {
				t.Errorf("last turn = %+v, want an error turn naming %q", last, tt.wantErr)
			}
		})
	}
}

func TestRunRetriesServerError(t *testing.T) {
	cfg, model, _ := setup(t, fakemodel.Flaky)
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(stderr.String(), "answered 500; retry 1 of 3") {
		t.Errorf("stderr = %q, want a retry notice", stderr.String())
	}
	// 1 failed attempt + 4 turns of the task.
	if got := len(model.Requests()); got != 4 {
		t.Errorf("model saw %d requests, want 4 (one failed, three turns)", got)
	}
}

func TestRunNoSecretInArtifacts(t *testing.T) {
	cfg, _, _ := setup(t, fakemodel.Task)
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v", err)
	}
	entries, err := os.ReadDir(cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(cfg.OutputDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(testKey)) {
			t.Errorf("%s contains the API key", e.Name())
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), testKey) {
		t.Error("output contains the API key")
	}
}

func readTurns(t *testing.T, dir string) []Turn {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, TurnsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []Turn
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var tr Turn
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatalf("turn line %q: %v", line, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, tr.Time); err != nil {
			t.Errorf("turn time %q: %v", tr.Time, err)
		}
		out = append(out, tr)
	}
	return out
}

func kinds(turns []Turn) []string {
	var out []string
	for _, tr := range turns {
		out = append(out, tr.Kind)
	}
	return out
}
