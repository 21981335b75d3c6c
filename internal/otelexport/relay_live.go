package otelexport

import (
	"context"
	"sync"
)

// Bounds of the relayed telemetry sent during a run: like the spans
// ([Live]), nothing waits on the collector but the sender's goroutine,
// and what it has no room for is left for the end.
const (
	liveRelayQueue = 256      // spool lines waiting to be sent
	liveRelayBytes = 32 << 20 // their bytes
)

// MaxRelayLine bounds one line of the spool (runs.FileAgentTelemetry) as
// read back: a payload of at most egress.DefaultRelayMaxBody bytes, as
// OTLP/JSON. A tail of the spool reads lines up to this long.
const MaxRelayLine = maxRelayLine

// LiveRelay sends the agent's own telemetry while the run goes: each line
// the gateway appends to its spool (runs.FileAgentTelemetry), read as the
// file grows, is sent to the collector as [ForwardAgentTelemetry] sends it
// at the end. [LiveRelay.Finish] says which lines the collector took, so
// the end skips them and the collector gets each payload once.
//
// Add never blocks and never waits on the collector: lines go to a
// bounded queue that one goroutine sends; a line the queue had no room
// for, or whose sending failed, is sent at the end.
type LiveRelay struct {
	fw    *forwarder
	queue chan relayItem
	done  chan struct{}

	mu     sync.Mutex
	closed bool
	queued int          // bytes waiting in queue
	seen   map[int]bool // spool line numbers handed over
	sent   map[int]bool // those the collector took
	err    error        // the last sending's error
}

type relayItem struct {
	n    int
	line []byte
}

// NewLiveRelay starts sending relayed telemetry to t's collector (not a
// file: a file is written once, at the end).
func NewLiveRelay(ctx context.Context, t Target, getenv func(string) string) (*LiveRelay, error) {
	fw, err := newForwarder(ctx, t, getenv)
	if err != nil {
		return nil, err
	}
	r := &LiveRelay{fw: fw, queue: make(chan relayItem, liveRelayQueue), done: make(chan struct{}), seen: map[int]bool{}, sent: map[int]bool{}}
	go r.send(context.WithoutCancel(ctx))
	return r, nil
}

// Add takes line n (1-based) of the spool, as read while the run goes
// and redacted as the record will be. A line number handed over before
// is not sent again (a tail that read the record again from its start).
func (r *LiveRelay) Add(n int, line []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.seen[n] || r.queued+len(line) > liveRelayBytes {
		return
	}
	select {
	case r.queue <- relayItem{n, line}:
		r.queued += len(line)
		r.seen[n] = true
	default:
	}
}

// send sends the queue one line at a time until Finish; what is still
// queued then is left for the end.
func (r *LiveRelay) send(ctx context.Context) {
	defer close(r.done)
	defer r.fw.stop(ctx)
	for it := range r.queue {
		r.mu.Lock()
		r.queued -= len(it.line)
		closed := r.closed
		r.mu.Unlock()
		if closed {
			continue
		}
		r.sendOne(ctx, it)
	}
}

func (r *LiveRelay) sendOne(ctx context.Context, it relayItem) {
	ctx, cancel := context.WithTimeout(ctx, liveSendWait)
	defer cancel()
	_, err := r.fw.send(ctx, it.line)
	r.mu.Lock()
	r.err = err
	if err == nil {
		r.sent[it.n] = true
	}
	r.mu.Unlock()
}

// Finish stops sending, waits for the line being sent (bounded by ctx),
// and returns the spool lines the collector took: the end skips them
// ([ForwardAgentTelemetry]'s skip).
func (r *LiveRelay) Finish(ctx context.Context) func(line int) bool {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
	}
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	r.mu.Lock()
	sent := make(map[int]bool, len(r.sent))
	for n := range r.sent {
		sent[n] = true
	}
	r.mu.Unlock()
	return func(n int) bool { return sent[n] }
}

// Err is the last sending's error (nil when the last one succeeded).
func (r *LiveRelay) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
