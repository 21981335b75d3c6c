package egress

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// Decision-log field names: the contract with the harness, the timeline
// and docs/egress.md. The [Decision] struct tags spell the same names; a
// test keeps them in step.
const (
	FieldTime          = "time"
	FieldRunID         = "run_id"
	FieldClient        = "client"
	FieldMethod        = "method"
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
)

// Values of [Decision.Decision].
const (
	Allow = "allow"
	Deny  = "deny"
)

// Decision is one line of egress-decisions.jsonl: what one request asked
// for and what the gateway did about it.
type Decision struct {
	Time          time.Time `json:"time"`            // when the request arrived, UTC
	RunID         string    `json:"run_id"`          // the run this gateway serves
	Client        string    `json:"client"`          // client ip:port
	Method        string    `json:"method"`          // CONNECT, GET, ...
	Host          string    `json:"host"`            // requested host, normalised when valid
	Port          uint16    `json:"port"`            // requested port (0: none or unparseable)
	ResolvedIP    string    `json:"resolved_ip"`     // the address dialed (or refused)
	Decision      string    `json:"decision"`        // Allow or Deny
	Rule          string    `json:"rule"`            // the allowlist entry (and IP rule) that allowed it
	Reason        string    `json:"reason"`          // why it was denied
	BytesUp       int64     `json:"bytes_up"`        // client -> upstream payload bytes
	BytesDown     int64     `json:"bytes_down"`      // upstream -> client payload bytes
	DurationMS    float64   `json:"duration_ms"`     // arrival to end of tunnel or response
	CorrelationID string    `json:"correlation_id"`  // trace-id of the request's traceparent
	Error         string    `json:"error,omitempty"` // an allowed request that failed upstream
	// Credential is [CredentialInjected] when the gateway added a held
	// credential to the request, [CredentialRefused] when a request for
	// a credential's host was refused; never the value.
	Credential string `json:"credential,omitempty"`
	// Scope is who the request was judged for ([Scope.String]: "agent",
	// "sidecar/docs/search"), when the gateway has a scope table.
	Scope string `json:"scope,omitempty"`
	// ScopeClaim is the request's [HeaderScope] values, read once when
	// the request arrives; never logged.
	ScopeClaim []string `json:"-"`
}

// DecisionLog writes [Decision] lines, one Write call each, so a line is
// never interleaved with another and a crash loses at most the line being
// written. It is safe for concurrent use.
type DecisionLog struct {
	mu     sync.Mutex
	w      io.Writer
	closer io.Closer
}

// NewDecisionLog writes decisions to w; the caller keeps ownership of w.
func NewDecisionLog(w io.Writer) *DecisionLog {
	return &DecisionLog{w: w}
}

// OpenDecisionLog appends to the file at path, creating it (mode 0600).
// It refuses a symbolic link at path: the file sits in a directory the
// workload may have written to, and the gateway must not be steered into
// overwriting something else.
func OpenDecisionLog(path string) (*DecisionLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening decision log: %w", err)
	}
	return &DecisionLog{w: f, closer: f}, nil
}

// Record writes d as one JSON line.
func (l *DecisionLog) Record(d Decision) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encoding decision: %w", err)
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("writing decision log: %w", err)
	}
	return nil
}

// Close flushes the log to stable storage and closes it, when
// [OpenDecisionLog] opened it.
func (l *DecisionLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closer == nil {
		return nil
	}
	if f, ok := l.closer.(*os.File); ok {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("syncing decision log: %w", err)
		}
	}
	if err := l.closer.Close(); err != nil {
		return fmt.Errorf("closing decision log: %w", err)
	}
	l.closer = nil
	return nil
}
