package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/caplog"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Decision-log field names: the contract with the harness, the timeline
// and docs/egress.md. The [Decision] struct tags spell the same names; a
// test keeps them in step.
const (
	FieldTime          = "time"
	FieldRunID         = "run_id"
	FieldClient        = "client"
	FieldMethod        = "method"
	FieldPath          = "path"
	FieldHost          = "host"
	FieldPort          = "port"
	FieldResolvedIP    = "resolved_ip"
	FieldDecision      = "decision"
	FieldRule          = "rule"
	FieldReason        = "reason"
	FieldBytesUp       = "bytes_up"
	FieldBytesDown     = "bytes_down"
	FieldDurationMS    = "duration_ms"
	FieldCorrelationID = "correlation_id"
	FieldError         = "error"
	FieldCredential    = "credential"
	FieldScope         = "scope"
	FieldLogFull       = "log_full"
	FieldHeldValue     = "held_value"
)

// Values of [Decision.Decision].
const (
	Allow = "allow"
	Deny  = "deny"
)

// Decision is one line of egress-decisions.jsonl: what one request asked
// for and what the gateway did about it.
type Decision struct {
	Time   time.Time `json:"time"`   // when the request arrived, UTC
	RunID  string    `json:"run_id"` // the run this gateway serves
	Client string    `json:"client"` // client ip:port
	Method string    `json:"method"` // CONNECT, GET, ...
	// Path is the request's path, with every query value redacted
	// ("?q=REDACTED"); empty for CONNECT.
	Path          string  `json:"path,omitempty"`
	Host          string  `json:"host"`            // requested host, normalised when valid
	Port          uint16  `json:"port"`            // requested port (0: none or unparseable)
	ResolvedIP    string  `json:"resolved_ip"`     // the address dialed (or refused)
	Decision      string  `json:"decision"`        // Allow or Deny
	Rule          string  `json:"rule"`            // the allowlist entry (and IP rule) that allowed it
	Reason        string  `json:"reason"`          // why it was denied
	BytesUp       int64   `json:"bytes_up"`        // what the client sent: request line and headers, then body or tunnel bytes
	BytesDown     int64   `json:"bytes_down"`      // upstream -> client payload bytes
	DurationMS    float64 `json:"duration_ms"`     // arrival to end of tunnel or response
	CorrelationID string  `json:"correlation_id"`  // trace-id of the request's traceparent
	Error         string  `json:"error,omitempty"` // an allowed request that failed upstream
	// Credential is [CredentialInjected] when the gateway added a held
	// credential to the request, [CredentialRefused] when a request for
	// a credential's host was refused; never the value.
	Credential string `json:"credential,omitempty"`
	// Scope is who the request was judged for ([Scope.String]: "agent",
	// "sidecar/docs/search"), when the gateway has a scope table.
	Scope string `json:"scope,omitempty"`
	// HeldValue says where a held credential value was seen, when
	// Credential is [CredentialReflected] or [CredentialCarried]: whose
	// value (its variable's name), in which form and where ("the value of
	// OPENAI_API_KEY (as is) in the answer header X-Echo-Auth"); never
	// the value.
	HeldValue string `json:"held_value,omitempty"`
	// LogFull marks the decision log's last line, written once when a
	// line would pass the log's byte budget or a write failed
	// ([ErrLogFull]): no line follows, and the gateway refused every
	// request from then on. Omitted otherwise.
	LogFull bool `json:"log_full,omitempty"`
	// ScopeClaim is the request's [HeaderScope] values, read once when
	// the request arrives; never logged.
	ScopeClaim []string `json:"-"`
	// written is set once the line was handed to the log (record).
	written bool
	// headBytes is the size of the request line and headers, added to
	// BytesUp when the line is written.
	headBytes int64
}

// DecisionLog writes [Decision] lines through a capped log
// (internal/caplog), one Write call each, so a line is never interleaved
// with another and a crash loses at most the line being written. It is
// safe for concurrent use.
//
// It writes at most its byte budget ([DefaultLogBudget], lowered to the
// process's RLIMIT_FSIZE minus [LogHeadroom] at the first write). The
// threat: a workload that floods the gateway with denied requests until
// the file hits the size limit, after which lines could no longer be
// written while the gateway went on forwarding (red team, finding 1).
// When a line would pass the budget, or any write fails, the log writes
// one last line with [Decision.LogFull] set (in the headroom kept for
// it) and refuses every later line with [ErrLogFull]; the gateway then
// refuses all traffic.
type DecisionLog struct {
	log *caplog.Log
	// file: [OpenDecisionLog] opened the log, and Close closes it. A
	// log over the caller's writer has nothing to close and goes on
	// writing.
	file bool
}

// LogHeadroom is what the decision log keeps free under its hard limit
// for its last line, the [Decision.LogFull] marker (bounded well below).
const LogHeadroom = caplog.Headroom

// DefaultLogBudget is the decision log's byte budget: below what the host
// copies of the file (runs.MaxCopyBytes), so the log the host reads is
// always whole and ends with the marker when it filled.
const DefaultLogBudget = runs.MaxCopyBytes - LogHeadroom

// ErrLogFull is returned by [DecisionLog.Record] once the log has reached
// its budget or a write to it has failed: the line was not recorded.
var ErrLogFull = errors.New("decision log full")

// ReasonLogFull begins the reason of the [Decision.LogFull] marker line
// and the gateway's answer to every request after it.
const ReasonLogFull = "decision log full: the gateway refuses all traffic"

// logOptions are the decision log's name, error and budget.
func logOptions() caplog.Options {
	return caplog.Options{Name: "decision log", Full: ErrLogFull, Budget: DefaultLogBudget}
}

// NewDecisionLog writes decisions to w; the caller keeps ownership of w.
func NewDecisionLog(w io.Writer) *DecisionLog {
	return &DecisionLog{log: caplog.New(w, logOptions())}
}

// OpenDecisionLog appends to the file at path, creating it (mode 0600).
// It refuses a symbolic link at path: the file sits in a directory the
// workload may have written to, and the gateway must not be steered into
// overwriting something else. The bytes already in the file count
// against the budget.
func OpenDecisionLog(path string) (*DecisionLog, error) {
	l, err := caplog.Open(path, runs.NoFollow, logOptions())
	if err != nil {
		return nil, fmt.Errorf("opening decision log: %w", err)
	}
	return &DecisionLog{log: l, file: true}, nil
}

// SetBudget lowers the log's byte budget to n (tests, and the test
// builds' knob); it never raises it.
func (l *DecisionLog) SetBudget(n int64) { l.log.SetBudget(n) }

// Full is why the log is full ([ErrLogFull] wrapped), or nil.
func (l *DecisionLog) Full() error { return l.log.Full() }

// Record writes d as one JSON line. Once the log is full it writes
// nothing and returns an error wrapping [ErrLogFull]; the line that finds
// it full (over the budget, or a failed write) makes the log write its
// marker first.
func (l *DecisionLog) Record(d Decision) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encoding decision: %w", err)
	}
	return l.log.Write(b, func(why error, brief bool) any { return logFullMarker(d, why, brief) })
}

// logFullMarker is the log's last line: what filled it and which line
// was lost, bounded to fit the headroom (brief: the reason alone).
func logFullMarker(lost Decision, why error, brief bool) Decision {
	what := lost.Decision
	if what == "" {
		what = "undecided"
	}
	m := Decision{
		Time:     time.Now().UTC(),
		RunID:    truncate(lost.RunID, 128),
		Decision: Deny,
		Reason:   ReasonLogFull,
		LogFull:  true,
	}
	if !brief {
		m.Reason = truncate(fmt.Sprintf("%s; this line and every later one are refused: %s. Not recorded: the line of the %s request %s %s:%d from %s, and those of the requests still in flight (cut off)",
			ReasonLogFull, why, what, truncate(lost.Method, 32), truncate(lost.Host, 255), lost.Port, truncate(lost.Client, 64)), 2048)
	}
	return m
}

// Close flushes the log to stable storage and closes it, when
// [OpenDecisionLog] opened it.
func (l *DecisionLog) Close() error {
	if !l.file {
		return nil
	}
	return l.log.Close()
}
