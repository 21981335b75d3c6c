package timeline

import (
	"encoding/json"
	"time"
)

// Schema is the value of every timeline.jsonl line's "schema" field. Each
// line carries it so that any single line, grepped out of the file, still
// says what it is.
const Schema = "mcpsidecar.timeline/v1"

// Sources of events.
const (
	SourceHarness = "harness"
	SourceAgent   = "agent"
	SourceSidecar = "sidecar"
	SourceGateway = "gateway"
	SourceProbe   = "probe"
)

// Event kinds.
const (
	KindRunStart       = "run_start"       // harness: the run began
	KindPhase          = "phase"           // harness: one timed phase
	KindContainerExit  = "container_exit"  // harness: a container stopped, with its exit code
	KindRunEnd         = "run_end"         // harness: the run ended, with its verdict
	KindModelRequest   = "model_request"   // agent: one request to the model
	KindAgentToolCall  = "agent_tool_call" // agent: the agent issued a tool call
	KindAnswerSaved    = "answer_saved"    // agent: the answer was written
	KindAgentError     = "agent_error"     // agent: an error the agent recorded
	KindToolCall       = "tool_call"       // sidecar: tools/call
	KindResourceRead   = "resource_read"   // sidecar: resources/read
	KindEgress         = "egress"          // gateway: one allow/deny decision
	KindInvalidRequest = "invalid_request" // sidecar: a request refused before its method was known
	KindPinCheck       = "pin_check"       // sidecar: a declared MCP server's tools compared with the pin at connect
	KindLogFull        = "log_full"        // gateway or sidecar: its log filled (or failed); it refused everything after
)

// How a child event was linked to its parent.
const (
	LinkCorrelation = "correlation_id" // both carry the same correlation id
	LinkTimeWindow  = "time_window"    // no id; it fell inside the parent's time span
)

// Event is one line of timeline.jsonl. Fields not meaningful for a kind are
// omitted.
type Event struct {
	Schema string `json:"schema"`
	// Seq is the event's position in time order, from 1.
	Seq int `json:"seq"`
	// Time is when the source recorded the event; zero (omitted) when the
	// source line had no valid time, and such events sort last.
	Time       time.Time `json:"time,omitzero"`
	DurationMS float64   `json:"duration_ms,omitempty"`
	Source     string    `json:"source"`
	Kind       string    `json:"kind"`
	// OK is false for a failed phase, call or request, a non-zero exit and
	// a denied connection.
	OK            bool   `json:"ok"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Parent is the Seq of the event this one belongs to (a tool call for
	// the egress it caused), and LinkedBy says how the link was made.
	Parent   int    `json:"parent,omitempty"`
	LinkedBy string `json:"linked_by,omitempty"`
	Summary  string `json:"summary"`

	Name  string `json:"name,omitempty"` // phase, tool, resource URI, container
	Error string `json:"error,omitempty"`

	// Harness.
	Role     string `json:"role,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`

	// Agent.
	Turn           int      `json:"turn,omitempty"`
	Model          string   `json:"model,omitempty"`
	ToolsRequested []string `json:"tools_requested,omitempty"`

	// Sidecar.
	SessionID     string          `json:"session_id,omitempty"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ResultPreview string          `json:"result_preview,omitempty"`

	// Gateway.
	Client     string `json:"client,omitempty"`
	Method     string `json:"method,omitempty"`
	Host       string `json:"host,omitempty"`
	Port       string `json:"port,omitempty"`
	ResolvedIP string `json:"resolved_ip,omitempty"`
	Decision   string `json:"decision,omitempty"`
	Rule       string `json:"rule,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Credential is "injected" or "refused" for a request on the
	// gateway's credential listener.
	Credential string `json:"credential,omitempty"`
	BytesUp    int64  `json:"bytes_up,omitempty"`
	BytesDown  int64  `json:"bytes_down,omitempty"`
	// Scope is who the gateway judged the request for ("agent",
	// "sidecar/<server>/<tool>"), when it had a scope table.
	Scope string `json:"scope,omitempty"`

	// Warning says what is wrong with the record itself: a request of
	// the agent's own that carries a tool call's correlation id.
	Warning string `json:"warning,omitempty"`

	// File and Line say where the event came from in the run directory.
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
}

// Denied reports whether the event is a denied connection attempt.
func (e *Event) Denied() bool { return e.Kind == KindEgress && e.Decision != "allow" }

// Timeline is the joined story of one run.
type Timeline struct {
	Schema  string    `json:"schema"`
	Dir     string    `json:"dir"`
	RunID   string    `json:"run_id"`
	Command string    `json:"command,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Finished is the run's end, or the last event's time without one.
	Finished time.Time `json:"finished,omitzero"`

	Image        ImageInfo         `json:"image"`
	Engine       EngineInfo        `json:"engine"`
	Networks     []NetworkInfo     `json:"networks"`
	Containers   []ContainerInfo   `json:"containers"`
	Phases       []PhaseInfo       `json:"phases"`
	Verdict      *Verdict          `json:"verdict,omitempty"`
	Degradations []json.RawMessage `json:"degradations,omitempty"`
	// Credentials says where each credential of the run lived.
	Credentials []CredentialInfo `json:"credentials,omitempty"`
	ExitCode    *int             `json:"exit_code,omitempty"`

	// Policy is what the gateway was configured to allow, when the run
	// directory holds it.
	Policy *Policy `json:"policy,omitempty"`

	// Question is the agent's question as the harness recorded it.
	Question string `json:"question,omitempty"`
	// Hardening is each container's hardening (run-metadata.json and
	// resolved-profile.json); Softenings is the spec's softening ledger.
	Hardening  []ContainerHardening `json:"hardening,omitempty"`
	Softenings []Softening          `json:"softenings,omitempty"`

	Events []Event      `json:"events"`
	Probe  *ProbeReport `json:"probe,omitempty"`
	Answer string       `json:"answer,omitempty"`
	// Stdout and Stderr are the tails of the captured output.
	Stdout    string       `json:"stdout_tail,omitempty"`
	Stderr    string       `json:"stderr_tail,omitempty"`
	Artifacts []Artifact   `json:"artifacts"`
	Problems  []Problem    `json:"problems"`
	Sources   []SourceInfo `json:"sources"`
}

// Policy is the gateway allowlist of a run.
type Policy struct {
	AllowedDomains []string `json:"allowed_domains"`
	AllowedIPs     []string `json:"allowed_ip_addresses"`
	HTTPPorts      []uint16 `json:"http_ports"`
	ConnectPorts   []uint16 `json:"connect_ports"`
}

// SourceInfo says how many events one source file contributed.
type SourceInfo struct {
	File   string `json:"file"`
	Events int    `json:"events"`
}

// Stats are counts over a timeline's events, for the summaries.
type Stats struct {
	ToolCalls, ResourceReads, ModelRequests int
	Allowed, Denied, FailedCalls, Unlinked  int
}

// Stats counts the timeline's events.
func (t *Timeline) Stats() Stats {
	var s Stats
	for i := range t.Events {
		e := &t.Events[i]
		switch e.Kind {
		case KindToolCall:
			s.ToolCalls++
		case KindResourceRead:
			s.ResourceReads++
		case KindModelRequest:
			s.ModelRequests++
		case KindEgress:
			if e.Denied() {
				s.Denied++
			} else {
				s.Allowed++
			}
			if e.Parent == 0 {
				s.Unlinked++
			}
		}
		if !e.OK && (e.Kind == KindToolCall || e.Kind == KindResourceRead) {
			s.FailedCalls++
		}
	}
	return s
}
