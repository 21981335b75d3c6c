package otelexport

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
	"github.com/mcpsidecar/mcpsidecar/internal/version"
)

// Bounds of the export during a run: it must never slow the run, so
// nothing waits on the collector but the sender's own goroutine.
const (
	liveQueue     = 8192                   // spans waiting to be sent; past it, left for the end
	liveBatch     = 512                    // spans per upload
	liveLinger    = 200 * time.Millisecond // how long a batch waits to fill
	liveSendWait  = 5 * time.Second        // one upload's bound
	livePending   = 1 << 16                // decisions waiting for the call they belong to
	liveClockSlop = time.Second            // the timeline's clockSlack
)

// Live sends a run's spans while the run goes: each tool call and
// resource read when its audit line is written, each model request, each
// egress decision once the call or request it belongs to is known. A
// span is sent live only when its parent is already the one the finished
// record will give it (internal/timeline's link); a decision whose parent
// cannot be known yet (no correlation id, its call not ended, who sent it
// not yet known) waits, and [Live.Finish] sends it with the rest of the
// trace. Ids are the post-run export's ([Export]): Finish skips what was
// delivered live, so the collector gets each span once.
//
// Add never blocks and never waits on the collector: spans go to a
// bounded queue that one goroutine uploads; a span the queue had no room
// for, or whose upload failed, is sent again by Finish.
type Live struct {
	mu      sync.Mutex
	ids     *idGen
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	started time.Time
	origins func() timeline.Origins
	now     func() time.Time
	closed  bool

	// calls and models are the sidecar's ended calls and the agent's
	// model requests seen, by correlation id: what a decision hangs from.
	calls, models map[string][]timeline.Event
	pending       []timeline.Event
	// sent is each span made live with the parent it was sent with;
	// delivered, those the collector accepted.
	sent      map[trace.SpanID]trace.SpanID
	delivered map[trace.SpanID]bool

	queue chan sdktrace.ReadOnlySpan
	done  chan struct{}
	exp   sdktrace.SpanExporter
	err   error // the last upload's error
}

// NewLive starts sending the spans of run runID (started at started, the
// harness's time) through exp. origins says who sent a gateway request
// (it may learn the sidecar's address as the run goes). res as in
// [Export].
func NewLive(ctx context.Context, runID string, started time.Time, exp sdktrace.SpanExporter, res *resource.Resource, origins func() timeline.Origins) (*Live, error) {
	if res == nil {
		var err error
		if res, err = DefaultResource(ctx); err != nil {
			return nil, err
		}
	}
	l := &Live{ids: newIDs(runID), started: started, origins: origins, now: time.Now,
		calls: map[string][]timeline.Event{}, models: map[string][]timeline.Event{},
		sent: map[trace.SpanID]trace.SpanID{}, delivered: map[trace.SpanID]bool{},
		queue: make(chan sdktrace.ReadOnlySpan, liveQueue), done: make(chan struct{}), exp: exp}
	l.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(enqueuer{l.queue}), sdktrace.WithIDGenerator(l.ids),
		sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	l.tracer = l.tp.Tracer(tracerName, trace.WithInstrumentationVersion(version.Version))
	go l.send(context.WithoutCancel(ctx))
	return l, nil
}

// Add takes one event read from the running run (internal/follow).
func (l *Live) Add(e timeline.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !l.inBounds(&e) {
		return
	}
	switch e.Kind {
	case timeline.KindToolCall, timeline.KindResourceRead:
		// A call is its correlation group's anchor: the record never
		// hangs it under anything but the run.
		l.make(&e, l.ids.root())
		if e.CorrelationID != "" {
			l.calls[e.CorrelationID] = append(l.calls[e.CorrelationID], e)
			l.retry()
		}
	case timeline.KindModelRequest:
		if e.CorrelationID == "" {
			l.make(&e, l.ids.root())
			return
		}
		if len(l.calls[e.CorrelationID]) > 0 {
			return // a call's id on a model request (reused): the end decides
		}
		l.make(&e, l.ids.root())
		l.models[e.CorrelationID] = append(l.models[e.CorrelationID], e)
		l.retry()
	case timeline.KindEgress:
		if !l.decide(&e) && len(l.pending) < livePending {
			l.pending = append(l.pending, e)
		}
	}
}

// inBounds reports whether e's time is one the record will keep as is
// (the timeline moves a time outside the run to its bound).
func (l *Live) inBounds(e *timeline.Event) bool {
	return !e.Time.IsZero() && !e.Time.Before(l.started.Add(-liveClockSlop)) && !e.Time.After(l.now().Add(liveClockSlop))
}

// decide sends decision e if its parent is known: for a request the
// sidecar sent, the nearest of its calls with the same correlation id;
// for one of the agent's, the nearest model request with it (as
// timeline's link). It reports whether it sent it.
func (l *Live) decide(e *timeline.Event) bool {
	if e.CorrelationID == "" {
		return false // linked by time window, over the whole run
	}
	var anchors []timeline.Event
	switch l.origins().Of(e) {
	case timeline.OriginSidecar:
		anchors = l.calls[e.CorrelationID]
	case timeline.OriginAgent:
		if len(l.calls[e.CorrelationID]) > 0 {
			return false // the agent's request carrying a call's id: the end decides
		}
		anchors = l.models[e.CorrelationID]
	default:
		return false // who sent it is not known yet
	}
	if len(anchors) == 0 {
		return false
	}
	near := anchors[0]
	for _, a := range anchors[1:] {
		if absDur(a.Time.Sub(e.Time)) < absDur(near.Time.Sub(e.Time)) {
			near = a
		}
	}
	l.make(e, l.ids.event(&near))
	return true
}

// retry sends the pending decisions whose parent is now known.
func (l *Live) retry() {
	kept := l.pending[:0]
	for _, e := range l.pending {
		if !l.decide(&e) {
			kept = append(kept, e)
		}
	}
	l.pending = kept
}

// make starts and ends e's span under parent; the processor queues it.
func (l *Live) make(e *timeline.Event, parent trace.SpanID) {
	id := l.ids.event(e)
	if _, ok := l.sent[id]; ok {
		return
	}
	l.sent[id] = parent
	l.ids.set(id)
	span(context.Background(), l.tracer, l.ids, e, parent)
}

// Finish stops the live export, waits for the upload under way (bounded
// by ctx), and sends the rest of the finished run tl through exp: the run
// span, its phases, and every span not delivered live. It reports how
// many spans were delivered live and how many of those the finished
// record puts under another parent.
func (l *Live) Finish(ctx context.Context, tl *timeline.Timeline, exp sdktrace.SpanExporter, res *resource.Resource) (Stats, error) {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	close(l.queue)
	select {
	case <-l.done:
	case <-ctx.Done():
	}
	l.mu.Lock()
	delivered := make(map[trace.SpanID]trace.SpanID, len(l.delivered))
	for id := range l.delivered {
		delivered[id] = l.sent[id]
	}
	l.mu.Unlock()
	moved := 0
	st, err := export(ctx, tl, exp, res, func(e *timeline.Event, parent trace.SpanID) bool {
		was, ok := delivered[l.ids.event(e)]
		if ok && was != parent {
			moved++
		}
		return ok
	})
	st.Moved = moved
	return st, err
}

// Err is the last upload's error (nil when the last one succeeded).
func (l *Live) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// send uploads the queue in batches until it is closed.
func (l *Live) send(ctx context.Context) {
	defer close(l.done)
	for {
		batch, open := l.gather()
		if len(batch) > 0 {
			l.upload(ctx, batch)
		}
		if !open {
			return
		}
	}
}

// gather waits for a first span, then up to liveLinger for a full batch.
func (l *Live) gather() ([]sdktrace.ReadOnlySpan, bool) {
	s, ok := <-l.queue
	if !ok {
		return nil, false
	}
	batch := []sdktrace.ReadOnlySpan{s}
	t := time.NewTimer(liveLinger)
	defer t.Stop()
	for len(batch) < liveBatch {
		select {
		case s, ok := <-l.queue:
			if !ok {
				return batch, false
			}
			batch = append(batch, s)
		case <-t.C:
			return batch, true
		}
	}
	return batch, true
}

func (l *Live) upload(ctx context.Context, batch []sdktrace.ReadOnlySpan) {
	ctx, cancel := context.WithTimeout(ctx, liveSendWait)
	defer cancel()
	err := l.exp.ExportSpans(ctx, batch)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
	if err != nil {
		return // Finish sends them again
	}
	for _, s := range batch {
		l.delivered[s.SpanContext().SpanID()] = true
	}
}

// enqueuer hands each ended span to the sender, never waiting: a span
// with no room is left for Finish.
type enqueuer struct{ q chan<- sdktrace.ReadOnlySpan }

func (p enqueuer) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p enqueuer) OnEnd(s sdktrace.ReadOnlySpan) {
	select {
	case p.q <- s:
	default:
	}
}

func (enqueuer) Shutdown(context.Context) error   { return nil }
func (enqueuer) ForceFlush(context.Context) error { return nil }

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
