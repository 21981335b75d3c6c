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
package otelexport

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
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
	Spans   int
}

// Export sends the run of tl through exp, as one trace, and flushes it
// before ctx ends. res is the resource (service name and attributes);
// nil takes [ServiceName] and the standard OTEL_* variables.
func Export(ctx context.Context, tl *timeline.Timeline, exp sdktrace.SpanExporter, res *resource.Resource) (Stats, error) {
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
	tracer := tp.Tracer("github.com/mcpsidecar/mcpsidecar/internal/otelexport", trace.WithInstrumentationVersion(version.Version))
	n := emit(ctx, tracer, ids, tl)
	if err := tp.ForceFlush(ctx); err != nil {
		return Stats{}, fmt.Errorf("flushing spans: %w", err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		return Stats{}, fmt.Errorf("shutting the exporter down: %w", err)
	}
	return Stats{TraceID: ids.trace.String(), Spans: n}, nil
}

// DefaultResource is service.name [ServiceName] (or OTEL_SERVICE_NAME)
// with OTEL_RESOURCE_ATTRIBUTES.
func DefaultResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx, resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version.Version)),
		resource.WithFromEnv())
}

// emit starts and ends every span of the run; it returns how many.
func emit(ctx context.Context, tracer trace.Tracer, ids *idGen, tl *timeline.Timeline) int {
	start, end := runBounds(tl)
	ids.next(0)
	rctx, root := tracer.Start(ctx, "mcpsidecar "+orDefault(tl.Command, "run"), trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(runAttributes(tl)...))
	n := 1
	for _, p := range tl.Phases {
		ids.nextPhase()
		_, s := tracer.Start(rctx, "phase "+p.Name, trace.WithTimestamp(p.Start))
		if !p.OK {
			s.SetStatus(codes.Error, p.Error)
		}
		s.End(trace.WithTimestamp(p.Start.Add(ms(p.DurationMS))))
		n++
	}
	// A span's id is its event's (ids.spanID), so a child can name its
	// parent before the parent's span is made: the timeline orders
	// events by time, and a call may be logged after the request it
	// caused.
	exportedSeq := map[int]bool{}
	for i := range tl.Events {
		if exported(&tl.Events[i]) {
			exportedSeq[tl.Events[i].Seq] = true
		}
	}
	rootSC := root.SpanContext()
	for i := range tl.Events {
		e := &tl.Events[i]
		if !exported(e) {
			continue
		}
		parent := rctx
		if e.Parent != 0 && exportedSeq[e.Parent] {
			parent = trace.ContextWithSpanContext(ctx, rootSC.WithSpanID(ids.spanID(e.Parent)))
		}
		ids.next(e.Seq)
		name, kind, attrs := describe(e)
		_, s := tracer.Start(parent, name, trace.WithTimestamp(e.Time), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
		if !e.OK {
			s.SetStatus(codes.Error, orDefault(e.Error, e.Summary))
		}
		s.End(trace.WithTimestamp(e.Time.Add(ms(e.DurationMS))))
		n++
	}
	verdictEvents(root, tl, end)
	root.End(trace.WithTimestamp(end))
	return n
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
// from its event's sequence number, so the same run exports the same
// trace. It is used from one goroutine (Export's).
type idGen struct {
	trace trace.TraceID
	seed  [8]byte
	span  uint64 // the id of the next span
	phase uint64
}

func newIDs(runID string) *idGen {
	sum := sha256.Sum256([]byte("mcpsidecar run " + runID))
	g := &idGen{}
	copy(g.trace[:], sum[:16])
	copy(g.seed[:], sum[16:24])
	return g
}

// next makes the next span's id that of event seq (0: the run).
func (g *idGen) next(seq int) { g.span = uint64(seq) + 1 }

// nextPhase makes the next span's id a phase's (apart from every event's).
func (g *idGen) nextPhase() {
	g.phase++
	g.span = 1<<62 | g.phase
}

func (g *idGen) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return g.trace, g.NewSpanID(context.Background(), g.trace)
}

func (g *idGen) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return g.id(g.span) }

// spanID is the id of event seq's span.
func (g *idGen) spanID(seq int) trace.SpanID { return g.id(uint64(seq) + 1) }

func (g *idGen) id(n uint64) trace.SpanID {
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], binary.BigEndian.Uint64(g.seed[:])^n)
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
