package sidecar

import (
	"context"
	"sync"
	"time"
)

// KindCallStart is the audit kind of the line written when a tools/call
// starts, before anything is sent upstream. Its tools/call line (same
// correlation_id) follows when the call ends, or, when the sidecar stops
// first, an end line with interrupted true. The threat: a call in flight
// when the run ends would otherwise reach an MCP server and leave no line
// at all (the end line is written only when the call returns, and the
// process can be killed before that); a start with no end is then the
// record's own proof that something was cut off.
const KindCallStart = "call_start"

// ErrorInterrupted begins the error of an end line the sidecar wrote
// because it stopped while the call was in flight.
const ErrorInterrupted = "interrupted"

// DefaultShutdownWait is how long the sidecar waits, once stopping, for
// cancelled calls to return before it writes their interrupted end lines
// itself. It is kept well below the harness's stop grace
// (orchestrate.StopGrace), after which the role is killed.
const DefaultShutdownWait = 2 * time.Second

// inflight is one tools/call between its start line and its end line.
type inflight struct {
	rec    Record // the start line's fields (time, ids, name, arguments, server)
	start  time.Time
	cancel context.CancelFunc
	ended  bool
}

// inflightCalls tracks the tools/calls in progress so that shutdown can
// cancel them and make sure each gets its end line exactly once.
type inflightCalls struct {
	mu       sync.Mutex
	calls    map[*inflight]struct{}
	stopping bool
}

// begin registers a call, writes its start line and returns the context
// the call must run under (cancelled at shutdown). Once the sidecar is
// stopping, the context is cancelled already: the call is recorded, and
// fails before it is sent anywhere. Every line the tracker writes is
// written under its lock, so shutdown's abandon (and the audit's close
// after it) cannot come between a call's claim and its line. When the
// start line cannot be written (the audit log is full, [ErrAuditFull]),
// the call is not registered and begin returns the error: the caller
// must refuse the call, as nothing may go upstream unrecorded.
func (c *inflightCalls) begin(ctx context.Context, audit *AuditLog, rec Record, start time.Time) (context.Context, *inflight, error) {
	ctx, cancel := context.WithCancel(ctx)
	call := &inflight{rec: rec, start: start, cancel: cancel}
	startRec := rec
	startRec.Kind = KindCallStart
	startRec.OK = true
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := audit.Write(startRec); err != nil {
		cancel()
		return ctx, nil, err
	}
	if c.calls == nil {
		c.calls = map[*inflight]struct{}{}
	}
	c.calls[call] = struct{}{}
	if c.stopping {
		cancel()
	}
	return ctx, call, nil
}

// finish cancels call's context and has write write its end line, once:
// not when shutdown has written it already. stopping tells write whether
// the sidecar was stopping by then.
func (c *inflightCalls) finish(call *inflight, write func(stopping bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	call.cancel()
	if call.ended {
		return
	}
	call.ended = true
	delete(c.calls, call)
	write(c.stopping)
}

// stop marks the sidecar as stopping and cancels every call in flight,
// so their upstream requests are abandoned now rather than answered after
// the record is closed.
func (c *inflightCalls) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	for call := range c.calls {
		call.cancel()
	}
}

// abandon writes the interrupted end line of every call still in flight
// (its handler did not return in time) and returns how many there were.
func (c *inflightCalls) abandon(audit *AuditLog, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.calls)
	for call := range c.calls {
		call.ended = true
		audit.Write(interruptedRecord(call, now, "the call had not returned when the sidecar stopped"))
	}
	clear(c.calls)
	return n
}

// interruptedRecord is the end line of a call cut off by shutdown.
func interruptedRecord(call *inflight, now time.Time, why string) Record {
	rec := call.rec
	rec.DurationMS = millis(now.Sub(call.start))
	rec.OK = false
	rec.Interrupted = true
	rec.Error = ErrorInterrupted + ": " + why
	return rec
}
