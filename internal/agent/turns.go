package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TurnsFile is the agent's record of its model turns, in the output dir.
const TurnsFile = runs.FileAgentTurns

// Turn kinds, as in the agent-turns.jsonl contract.
const (
	KindModelRequest = "model_request"
	KindToolCall     = "tool_call"
	KindAnswerSaved  = "answer_saved"
	KindError        = "error"
)

// Turn is one line of agent-turns.jsonl. The field names are the contract
// the timeline reads; the API key is never part of a turn.
type Turn struct {
	Time           string   `json:"time"`
	Turn           int      `json:"turn"`
	Kind           string   `json:"kind"`
	Model          string   `json:"model,omitempty"`
	ToolsRequested []string `json:"tools_requested,omitempty"`
	Tool           string   `json:"tool,omitempty"`
	CorrelationID  string   `json:"correlation_id,omitempty"`
	DurationMS     float64  `json:"duration_ms"`
	OK             bool     `json:"ok"`
	Error          string   `json:"error,omitempty"`
	// OfferedAs is the name the model called a sidecar tool by, when the
	// API refused its MCP name (Tool) and the agent offered another.
	OfferedAs string `json:"offered_as,omitempty"`
	// IgnoredArguments are keys of a call the tool does not declare; they
	// were dropped, not sent.
	IgnoredArguments []string `json:"ignored_arguments,omitempty"`
	// RenamedTools (first model_request only) maps each offered name to the
	// sidecar tool's MCP name, for every name the API would have refused.
	RenamedTools map[string]string `json:"renamed_tools,omitempty"`
	// DroppedTools (first model_request only) are sidecar tools left out
	// because the API takes at most 128 tools.
	DroppedTools []string `json:"dropped_tools,omitempty"`
}

// turnLog appends turns, one write per line, so a crash never leaves a torn
// line behind a complete one.
type turnLog struct {
	mu  sync.Mutex
	f   *os.File
	now func() time.Time
}

// openTurnLog opens dir/agent-turns.jsonl for appending, never through a
// planted link.
func openTurnLog(dir string) (*turnLog, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening output directory: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(TurnsFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND|runs.NoFollow, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening turn log: %w", err)
	}
	return &turnLog{f: f, now: time.Now}, nil
}

// add writes t, stamping its time. A log that cannot be written must not
// hide the run's own outcome, so the error is returned for the caller to
// report, not to abort on.
func (l *turnLog) add(t Turn) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Time = l.now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encoding turn: %w", err)
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("writing turn log: %w", err)
	}
	return nil
}

func (l *turnLog) close() error {
	if l == nil {
		return nil
	}
	l.f.Sync()
	return l.f.Close()
}

// ms converts a duration to milliseconds with microsecond precision.
func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
