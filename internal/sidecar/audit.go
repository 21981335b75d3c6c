package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

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
}

// AuditLog appends records as JSON lines. Each record is marshalled first
// and then written with a single write call under a mutex to a file opened
// with O_APPEND, so lines are never torn or interleaved, whatever the
// concurrency. A nil *AuditLog records nothing (auditing off).
type AuditLog struct {
	mu     sync.Mutex
	w      io.Writer
	f      *os.File
	closed bool
	err    error // first write error, reported by Close
}

// OpenAuditLog opens (creating, mode 0600) path for appending.
func OpenAuditLog(path string) (*AuditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	return &AuditLog{w: f, f: f}, nil
}

// NewAuditLog writes records to w (for tests and in-memory use).
func NewAuditLog(w io.Writer) *AuditLog { return &AuditLog{w: w} }

// Write appends r as one line. Arguments and preview are bounded and
// redacted here, so no caller can forget to.
func (l *AuditLog) Write(r Record) {
	if l == nil {
		return
	}
	r.Arguments = boundArguments(r.Arguments)
	r.ResultPreview = Preview(r.ResultPreview, MaxPreviewChars)
	r.Error = Preview(r.Error, 2*MaxPreviewChars)
	line, err := json.Marshal(r)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"kind":%q,"error":"marshalling audit record failed"}`, r.Kind))
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.err = errors.Join(l.err, errors.New("audit record written after close"))
		return
	}
	if _, err := l.w.Write(line); err != nil && l.err == nil {
		l.err = fmt.Errorf("writing audit log: %w", err)
	}
}

// Close syncs the file to disk and closes it. It reports the first write
// error, if any: a lost audit line must not pass silently.
func (l *AuditLog) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.err
	}
	l.closed = true
	if l.f != nil {
		if err := l.f.Sync(); err != nil {
			l.err = errors.Join(l.err, fmt.Errorf("syncing audit log: %w", err))
		}
		if err := l.f.Close(); err != nil {
			l.err = errors.Join(l.err, fmt.Errorf("closing audit log: %w", err))
		}
	}
	return l.err
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
