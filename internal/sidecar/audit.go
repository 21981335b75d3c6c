package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/caplog"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// AuditFileName is the audit log's name in the run directory.
const AuditFileName = runs.FileAudit

// Audit record kinds. KindInvalid is for a request refused before its method
// could be known (unparsable JSON, oversized body); the two others are the
// contract's kinds. [KindCallStart] and [KindPinCheck] are the other two.
const (
	KindToolCall     = "tools/call"
	KindResourceRead = "resources/read"
	KindInvalid      = "invalid_request"
)

// maxArgumentBytes bounds the arguments kept in one audit record, so one
// huge call cannot bloat the log.
const maxArgumentBytes = 8 << 10

// Record is one line of mcp-sidecar-tool-calls.jsonl. The JSON field names
// are the cross-part contract (timeline, report and tests read them).
type Record struct {
	Time          string          `json:"time"`
	SessionID     string          `json:"session_id"`
	Kind          string          `json:"kind"`
	Name          string          `json:"name"`
	Arguments     json.RawMessage `json:"arguments"`
	OK            bool            `json:"ok"`
	Error         string          `json:"error"`
	DurationMS    float64         `json:"duration_ms"`
	ResultPreview string          `json:"result_preview"`
	CorrelationID string          `json:"correlation_id"`
	// Server is the declared MCP server a tools/call went to, or a
	// pin_check was about ("" for local tools and resources).
	Server string `json:"server"`
	// Interrupted marks the end line of a tools/call the sidecar cut off
	// when it stopped (its Error begins with [ErrorInterrupted]). Omitted
	// otherwise.
	Interrupted bool `json:"interrupted,omitempty"`
	// LogFull marks the audit log's last line (kind [KindLogFull]),
	// written once when a line would pass the log's byte budget or a
	// write failed: no line follows, and the sidecar refused every call
	// from then on. Omitted otherwise.
	LogFull bool `json:"log_full,omitempty"`
}

// AuditLog appends records as JSON lines through a capped log
// (internal/caplog). Each record is marshalled first and then written
// with a single write call under a mutex to a file opened with O_APPEND,
// so lines are never torn or interleaved, whatever the concurrency. A nil
// *AuditLog records nothing (auditing off).
//
// It writes at most its byte budget ([DefaultAuditBudget], lowered to the
// process's RLIMIT_FSIZE minus [AuditHeadroom] at the first write). When
// a line would pass it, or any write fails, the log writes one last line
// ([KindLogFull]) in the headroom and refuses every later line with
// [ErrAuditFull]; the sidecar then refuses every call (auditmw.go). The
// threat: a workload that fills the log with calls until lines can no
// longer be written, and then makes calls the record does not show (the
// gateway's decision log had this hole: redteam-kube finding 1).
type AuditLog struct {
	log *caplog.Log
}

// KindLogFull is the kind of the audit log's last line when it filled.
const KindLogFull = "log_full"

// AuditHeadroom is what the audit log keeps free under its hard limit for
// its [KindLogFull] line (bounded well below).
const AuditHeadroom = caplog.Headroom

// DefaultAuditBudget is the audit log's byte budget: below what the host
// copies of the file (runs.MaxCopyBytes), so the copy is whole and ends
// with the [KindLogFull] line when the log filled.
const DefaultAuditBudget = runs.MaxCopyBytes - AuditHeadroom

// ErrAuditFull is returned by [AuditLog.Write] once the log has reached
// its budget or a write to it failed: the line was not recorded.
var ErrAuditFull = errors.New("audit log full")

// ReasonAuditFull is the error of the [KindLogFull] line and of every
// call refused after it.
const ReasonAuditFull = "audit log full: the sidecar refuses all calls"

// auditOptions are the audit log's name, error and budget.
func auditOptions() caplog.Options {
	return caplog.Options{Name: "audit log", Full: ErrAuditFull, Budget: DefaultAuditBudget}
}

// OpenAuditLog opens (creating, mode 0600) path for appending. The bytes
// already in the file count against the budget.
func OpenAuditLog(path string) (*AuditLog, error) {
	l, err := caplog.Open(path, 0, auditOptions())
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	return &AuditLog{log: l}, nil
}

// NewAuditLog writes records to w (for tests and in-memory use).
func NewAuditLog(w io.Writer) *AuditLog {
	return &AuditLog{log: caplog.New(w, auditOptions())}
}

// SetBudget lowers the log's byte budget to n (tests, and the test
// builds' knob); it never raises it.
func (l *AuditLog) SetBudget(n int64) { l.log.SetBudget(n) }

// Full is why the log is full ([ErrAuditFull] wrapped), or nil.
func (l *AuditLog) Full() error {
	if l == nil {
		return nil
	}
	return l.log.Full()
}

// Write appends r as one line. Arguments and preview are bounded and
// redacted here, so no caller can forget to. It returns an error wrapping
// [ErrAuditFull] when the line was not written: a caller about to send a
// call upstream must then refuse it.
func (l *AuditLog) Write(r Record) error {
	if l == nil {
		return nil
	}
	r.Arguments = boundArguments(r.Arguments)
	r.ResultPreview = Preview(r.ResultPreview, MaxPreviewChars)
	r.Error = Preview(r.Error, 2*MaxPreviewChars)
	line, err := json.Marshal(r)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"kind":%q,"error":"marshalling audit record failed"}`, r.Kind))
	}
	return l.log.Write(line, func(why error, brief bool) any { return logFullRecord(r, why, brief) })
}

// logFullRecord is the log's last line, naming the record that was lost
// (brief: the reason alone, to fit the headroom).
func logFullRecord(lost Record, why error, brief bool) Record {
	m := Record{Time: timestamp(time.Now()), Kind: KindLogFull, Arguments: json.RawMessage("null"), Error: ReasonAuditFull, LogFull: true}
	if !brief {
		m.Error = Preview(fmt.Sprintf("%s; this line and every later one are refused: %s. Not recorded: the %s line of %q (correlation id %s), and every call after it (refused)", ReasonAuditFull, why, lost.Kind, Preview(lost.Name, 200), lost.CorrelationID), 2*MaxPreviewChars)
	}
	return m
}

// Close syncs the file to disk and closes it. It reports the first write
// error, or that the log filled, if so: a lost audit line must not pass
// silently.
func (l *AuditLog) Close() error {
	if l == nil {
		return nil
	}
	return errors.Join(l.log.Full(), l.log.Close())
}

// boundArguments redacts raw arguments and keeps them valid JSON and small.
func boundArguments(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	s := Redact(string(raw))
	if len(s) > maxArgumentBytes || !json.Valid([]byte(s)) {
		b, _ := json.Marshal(map[string]any{
			"_unparsed_or_truncated": true,
			"bytes":                  len(raw),
			"preview":                Preview(s, MaxPreviewChars),
		})
		return b
	}
	return json.RawMessage(s)
}

// timestamp formats t for the "time" field: RFC 3339, nanoseconds, UTC.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
