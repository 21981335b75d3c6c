package timeline

import (
	"encoding/json"
	"fmt"
	"time"
)

// The wire types below mirror the JSON each producer writes (the
// cross-part contract). They are private copies on purpose: this package
// reads artifacts, it must not import the packages that write them (the
// harness imports this one), and unknown fields are ignored so a producer
// may add fields without breaking the report.

// auditLine is one line of mcp-sidecar-tool-calls.jsonl.
type auditLine struct {
	Time          time.Time       `json:"time"`
	SessionID     string          `json:"session_id"`
	Kind          string          `json:"kind"` // "tools/call" | "resources/read"
	Name          string          `json:"name"`
	Arguments     json.RawMessage `json:"arguments"`
	OK            *bool           `json:"ok"`
	Error         string          `json:"error"`
	DurationMS    float64         `json:"duration_ms"`
	ResultPreview string          `json:"result_preview"`
	CorrelationID string          `json:"correlation_id"`
}

// decisionLine is one line of egress-decisions.jsonl.
type decisionLine struct {
	Time          time.Time `json:"time"`
	RunID         string    `json:"run_id"`
	Client        string    `json:"client"`
	Method        string    `json:"method"`
	Host          string    `json:"host"`
	Port          flexPort  `json:"port"`
	ResolvedIP    string    `json:"resolved_ip"`
	Decision      string    `json:"decision"` // "allow" | "deny"
	Rule          string    `json:"rule"`
	Reason        string    `json:"reason"`
	BytesUp       int64     `json:"bytes_up"`
	BytesDown     int64     `json:"bytes_down"`
	DurationMS    float64   `json:"duration_ms"`
	CorrelationID string    `json:"correlation_id"`
	Error         string    `json:"error"`      // an allowed request that failed upstream
	Credential    string    `json:"credential"` // "injected" | "refused" on the credential listener
	Scope         string    `json:"scope"`      // "agent" | "sidecar/<server>/<tool>", with a scope table
	LogFull       bool      `json:"log_full"`   // the log's last line: it filled, the gateway refused all traffic after
	HeldValue     string    `json:"held_value"` // where a held value was seen ("reflected" or "carried" credential)
}

// turnLine is one line of agent-turns.jsonl.
type turnLine struct {
	Time           time.Time `json:"time"`
	Turn           int       `json:"turn"`
	Kind           string    `json:"kind"` // model_request | tool_call | answer_saved | error
	Model          string    `json:"model"`
	ToolsRequested []string  `json:"tools_requested"`
	Tool           string    `json:"tool"`
	CorrelationID  string    `json:"correlation_id"`
	DurationMS     float64   `json:"duration_ms"`
	OK             *bool     `json:"ok"`
	Error          string    `json:"error"`
}

// runMetadata is the part of run-metadata.json the timeline uses.
type runMetadata struct {
	Schema       string            `json:"schema"`
	RunID        string            `json:"run_id"`
	Command      string            `json:"command"`
	Started      time.Time         `json:"started"`
	Finished     time.Time         `json:"finished"`
	Image        ImageInfo         `json:"image"`
	Engine       EngineInfo        `json:"engine"`
	Networks     []NetworkInfo     `json:"networks"`
	Containers   []ContainerInfo   `json:"containers"`
	Phases       []PhaseInfo       `json:"phases"`
	Verdict      *Verdict          `json:"verdict"`
	Degradations []json.RawMessage `json:"degradations"`
	Credentials  []CredentialInfo  `json:"credentials"`
	ExitCode     *int              `json:"exit_code"`
}

// ImageInfo is the runtime image a run used.
type ImageInfo struct {
	Tag       string `json:"tag"`
	Built     bool   `json:"built"`
	Method    string `json:"method,omitempty"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
}

// NetworkInfo is one per-run Docker network.
type NetworkInfo struct {
	Name     string `json:"name"`
	ID       string `json:"id,omitempty"`
	Internal bool   `json:"internal"`
}

// ContainerInfo is one container of a run. Started and Finished are read
// when the harness records them; otherwise the container's phase gives its
// place on the timeline.
type ContainerInfo struct {
	Role            string    `json:"role"`
	Name            string    `json:"name"`
	ID              string    `json:"id,omitempty"`
	ExitCode        *int      `json:"exit_code"`
	Networks        []string  `json:"networks"`
	Aliases         []string  `json:"aliases"`
	PeakMemoryBytes int64     `json:"peak_memory_bytes,omitempty"`
	TimedOut        bool      `json:"timed_out,omitempty"`
	OOMKilled       bool      `json:"oom_killed,omitempty"`
	Started         time.Time `json:"started,omitzero"`
	Finished        time.Time `json:"finished,omitzero"`
}

// PhaseInfo is one timed phase of the harness.
type PhaseInfo struct {
	Name       string    `json:"name"`
	Start      time.Time `json:"start"`
	DurationMS float64   `json:"duration_ms"`
	OK         bool      `json:"ok"`
	Error      string    `json:"error,omitempty"`
}

// Verdict is the run's overall verdict and the checks behind it.
type Verdict struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// Check is one verdict check.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// flexPort accepts a port written as a JSON number or a string.
type flexPort string

// UnmarshalJSON implements [json.Unmarshaler].
func (p *flexPort) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*p = flexPort(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("port: want a number or a string, got %s", b)
	}
	*p = flexPort(s)
	return nil
}

// EngineInfo is the Docker daemon a run used.
type EngineInfo struct {
	Version    string `json:"version,omitempty"`
	APIVersion string `json:"api_version,omitempty"`
}
