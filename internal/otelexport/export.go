// Package otelexport sends a run's record to an OpenTelemetry collector as
// one trace (issue 33): the run is the root span; the harness's phases,
// each model request, each tool call and resource read, and each egress
// decision are spans parented as the timeline links them (a denied
// request under the tool call that caused it); the verdict's checks,
// degradations and hardening are events and attributes of the run span.
//
// It reads only the record (internal/timeline builds it from the run
// directory) and runs on the host: nothing in the sandbox gains a way
// out. What it sends is what the run directory already holds, redacted as
// every artifact is; a held credential is named (injected, refused,
// reflected), never its value, which no artifact holds.
//
// The trace and span ids are derived from the run id and the events'
// sequence numbers, so exporting a run again sends the same trace.
//
// It also sends the agent's own telemetry that the gateway relayed
// (agent_telemetry; traces, metrics and logs) to the same collector:
// while the run goes, each payload as the gateway spools it ([LiveRelay],
// given lines the caller read and redacted), and at the end the rest,
// from the run directory, as redacted there ([ForwardAgentTelemetry]).
package otelexport

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
	"github.com/mcpsidecar/mcpsidecar/internal/version"
)

// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
// says otherwise.
const ServiceName = "mcpsidecar"

// Stats is what an export sent.
type Stats struct {
	TraceID string
	// Spans is how many spans the trace has; Live, how many of them were
	// sent while the run went ([Live]) and not again.
	Spans, Live int
	// Moved counts spans sent during the run whose parent in the
	// finished record is another (a correlation id the workload reused
	// after them): the collector keeps the parent they were sent with.
	Moved int
}

// Export sends the run of tl through exp, as one trace, and flushes it
// before ctx ends. res is the resource (service name and attributes);
// nil takes [ServiceName] and the standard OTEL_* variables.
func Export(ctx context.Context, tl *timeline.Timeline, exp sdktrace.SpanExporter, res *resource.Resource) (Stats, error) {
	return export(ctx, tl, exp, res, nil)
}

// export is Export without the spans skip says were sent already (by
// [Live], during the run).
func export(ctx context.Context, tl *timeline.Timeline, exp sdktrace.SpanExporter, res *resource.Resource, skip func(*timeline.Event, trace.SpanID) bool) (Stats, error) {
	if tl.RunID == "" {
		return Stats{}, errors.New("the run has no id (run-metadata.json is missing or has none)")
	}
	if res == nil {
		var err error
		if res, err = DefaultResource(ctx); err != nil {
			return Stats{}, err
		}
	}
	ids := newIDs(tl.RunID)
	// Batched, so that one flush bounded by ctx sends everything: a
	// collector that is down costs at most ctx's time, never a wait per
	// span.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(1<<20), sdktrace.WithBlocking()),
		sdktrace.WithIDGenerator(ids), sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	n, skipped := emit(ctx, tp.Tracer(tracerName, trace.WithInstrumentationVersion(version.Version)), ids, tl, skip)
	if err := tp.ForceFlush(ctx); err != nil {
		return Stats{}, fmt.Errorf("flushing spans: %w", err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		return Stats{}, fmt.Errorf("shutting the exporter down: %w", err)
	}
	return Stats{TraceID: ids.trace.String(), Spans: n + skipped, Live: skipped}, nil
}

// tracerName is the instrumentation scope of every span.
const tracerName = "github.com/mcpsidecar/mcpsidecar/internal/otelexport"

// DefaultResource is service.name [ServiceName] (or OTEL_SERVICE_NAME)
// with OTEL_RESOURCE_ATTRIBUTES.
func DefaultResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx, resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version.Version)),
		resource.WithFromEnv())
}

// emit starts and ends every span of the run but those skip says were
// sent already; it returns how many it made and how many it skipped.
func emit(ctx context.Context, tracer trace.Tracer, ids *idGen, tl *timeline.Timeline, skip func(*timeline.Event, trace.SpanID) bool) (int, int) {
	start, end := runBounds(tl)
	ids.set(ids.root())
	rctx, root := tracer.Start(ctx, "mcpsidecar "+orDefault(tl.Command, "run"), trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(runAttributes(tl)...))
	n, skipped := 1, 0
	for i, p := range tl.Phases {
		ids.set(ids.phase(i))
		_, s := tracer.Start(rctx, "phase "+p.Name, trace.WithTimestamp(p.Start))
		if !p.OK {
			s.SetStatus(codes.Error, p.Error)
		}
		s.End(trace.WithTimestamp(p.Start.Add(ms(p.DurationMS))))
		n++
	}
	// A span's id is its event's (ids.event), so a child can name its
	// parent before the parent's span is made: the timeline orders
	// events by time, and a call may be logged after the request it
	// caused.
	bySeq := map[int]*timeline.Event{}
	for i := range tl.Events {
		if exported(&tl.Events[i]) {
			bySeq[tl.Events[i].Seq] = &tl.Events[i]
		}
	}
	for i := range tl.Events {
		e := &tl.Events[i]
		if !exported(e) {
			continue
		}
		id := ids.event(e)
		if skip != nil && skip(e, parentID(ids, bySeq, e)) {
			skipped++
			continue
		}
		ids.set(id)
		span(ctx, tracer, ids, e, parentID(ids, bySeq, e))
		n++
	}
	verdictEvents(root, tl, end)
	root.End(trace.WithTimestamp(end))
	return n, skipped
}

// parentID is the span id of e's parent: the event the timeline links it
// to, else the run.
func parentID(ids *idGen, bySeq map[int]*timeline.Event, e *timeline.Event) trace.SpanID {
	if p := bySeq[e.Parent]; e.Parent != 0 && p != nil {
		return ids.event(p)
	}
	return ids.root()
}

// span makes event e's span (its id set in ids) under parent.
func span(ctx context.Context, tracer trace.Tracer, ids *idGen, e *timeline.Event, parent trace.SpanID) {
	pctx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: ids.trace, SpanID: parent, TraceFlags: trace.FlagsSampled}))
	name, kind, attrs := describe(e)
	_, s := tracer.Start(pctx, name, trace.WithTimestamp(e.Time), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if !e.OK {
		s.SetStatus(codes.Error, orDefault(e.Error, e.Summary))
	}
	s.End(trace.WithTimestamp(e.Time.Add(ms(e.DurationMS))))
}

// exported reports whether e becomes a span: the events that are work
// (requests, calls, decisions); the harness's own markers are the run
// span and its phases and events.
func exported(e *timeline.Event) bool {
	switch e.Kind {
	case timeline.KindRunStart, timeline.KindRunEnd, timeline.KindPhase:
		return false
	}
	return !e.Time.IsZero()
}

// runBounds is the run span's start and end: the record's, else the
// events'.
func runBounds(tl *timeline.Timeline) (time.Time, time.Time) {
	start, end := tl.Started, tl.Finished
	for i := range tl.Events {
		e := &tl.Events[i]
		if e.Time.IsZero() {
			continue
		}
		if start.IsZero() || e.Time.Before(start) {
			start = e.Time
		}
		if t := e.Time.Add(ms(e.DurationMS)); end.IsZero() || t.After(end) {
			end = t
		}
	}
	if start.IsZero() {
		start = time.Now()
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

func runAttributes(tl *timeline.Timeline) []attribute.KeyValue {
	a := []attribute.KeyValue{
		attribute.String("mcpsidecar.run.id", tl.RunID),
		attribute.String("mcpsidecar.run.command", tl.Command),
		attribute.String("mcpsidecar.image", tl.Image.Tag),
	}
	if tl.ExitCode != nil {
		a = append(a, attribute.Int("mcpsidecar.run.exit_code", *tl.ExitCode))
	}
	if tl.Verdict != nil {
		a = append(a, attribute.Bool("mcpsidecar.verdict.ok", tl.Verdict.OK))
	}
	a = append(a, attribute.Int("mcpsidecar.degradations", len(tl.Degradations)))
	for _, h := range tl.Hardening {
		if h.Report == nil {
			continue
		}
		var enforced []string
		for _, l := range h.Report.Layers {
			if l.Enforced {
				enforced = append(enforced, l.Name)
			}
		}
		a = append(a, attribute.StringSlice("mcpsidecar.hardening."+h.Role+".enforced", enforced))
	}
	return a
}

// verdictEvents adds each verdict check and each degradation to the run
// span, and sets its status.
func verdictEvents(root trace.Span, tl *timeline.Timeline, at time.Time) {
	if tl.Verdict == nil {
		return
	}
	for _, c := range tl.Verdict.Checks {
		root.AddEvent("verdict check", trace.WithTimestamp(at), trace.WithAttributes(
			attribute.String("mcpsidecar.check.name", c.Name), attribute.Bool("mcpsidecar.check.ok", c.OK),
			attribute.String("mcpsidecar.check.detail", c.Detail)))
	}
	for _, d := range tl.Degradations {
		root.AddEvent("degradation", trace.WithTimestamp(at), trace.WithAttributes(attribute.String("mcpsidecar.degradation", string(d))))
	}
	if !tl.Verdict.OK {
		root.SetStatus(codes.Error, "the verdict failed")
	}
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// idGen gives the run's trace id to every span and each span an id made
// from what it stands for: the run, a phase by its place, an event by the
// line it was read from (its file and line number; an event of no line,
// by its place in the record). A line's span has the same id whether it
// is sent while the run goes ([Live]) or from the record after, and the
// same run exports the same trace. The span id of the next span is set
// before it is started; it is used under one lock (Export's goroutine, or
// Live's mutex).
type idGen struct {
	trace trace.TraceID
	seed  []byte
	next  trace.SpanID
}

func newIDs(runID string) *idGen {
	sum := sha256.Sum256([]byte("mcpsidecar run " + runID))
	g := &idGen{seed: sum[16:]}
	copy(g.trace[:], sum[:16])
	return g
}

// set makes id the next span's.
func (g *idGen) set(id trace.SpanID) { g.next = id }

func (g *idGen) NewIDs(context.Context) (trace.TraceID, trace.SpanID) { return g.trace, g.next }

func (g *idGen) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return g.next }

// root is the run span's id.
func (g *idGen) root() trace.SpanID { return g.id("run") }

// phase is the id of the run's i-th phase.
func (g *idGen) phase(i int) trace.SpanID { return g.id("phase " + strconv.Itoa(i)) }

// event is the id of e's span.
func (g *idGen) event(e *timeline.Event) trace.SpanID {
	if e.Line > 0 && e.File != timeline.FileRunMetadata {
		return g.id("line " + e.File + ":" + strconv.Itoa(e.Line))
	}
	return g.id("event " + strconv.Itoa(e.Seq))
}

func (g *idGen) id(what string) trace.SpanID {
	sum := sha256.Sum256(append(append([]byte{}, g.seed...), what...))
	var id trace.SpanID
	copy(id[:], sum[:8])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// port is a decision's port as a number (0 when absent).
func port(s string) int {
	p, _ := strconv.Atoi(s)
	return p
}

// RunTraceParent is the W3C traceparent of run runID's span (the trace
// [Export] and [Live] send): a workload given it (TRACEPARENT, with
// agent_telemetry) parents its own spans under the run's.
func RunTraceParent(runID string) string {
	ids := newIDs(runID)
	return "00-" + ids.trace.String() + "-" + ids.root().String() + "-01"
}
