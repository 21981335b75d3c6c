package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/follow"
	"github.com/mcpsidecar/mcpsidecar/internal/otelexport"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// liveInterval is how often the live export reads the run's logs.
const liveInterval = 200 * time.Millisecond

// liveExport is the OpenTelemetry export during a run (issue 33): while
// the lifecycle watches the run (sandbox.Options.Watch), the roles' logs
// are read as they grow (internal/follow) and each span whose place in
// the trace is settled is sent (otelexport.Live), and so is each payload
// of the agent's own telemetry the gateway spools (otelexport.LiveRelay);
// the export at the end sends the rest.
type liveExport struct {
	f      otlpFlags
	errW   io.Writer
	mu     sync.Mutex
	live   *otelexport.Live
	relay  *otelexport.LiveRelay
	exp    sdktrace.SpanExporter
	runDir string
}

// hookLiveExport starts the live export with the run's watch when the
// user named a collector to send to (not a file: a file is written once,
// at the end). nil when there is none.
func hookLiveExport(so *sandbox.Options, f otlpFlags, errW io.Writer) *liveExport {
	if f.file != "" || !f.wanted() {
		return nil
	}
	l := &liveExport{f: f, errW: errW}
	prev := so.Watch
	so.Watch = func(ctx context.Context, runDir string, redact sandbox.Redactor) {
		var wg sync.WaitGroup
		if prev != nil {
			wg.Go(func() { prev(ctx, runDir, redact) })
		}
		l.follow(ctx, runDir, redact)
		wg.Wait()
	}
	return l
}

// follow sends the run's spans as its logs grow, until ctx ends (the
// workload's end); it never fails the run.
func (l *liveExport) follow(ctx context.Context, runDir string, runRedact sandbox.Redactor) {
	started := time.Now().Add(-time.Minute)
	if m, err := runs.ReadMetadata(runDir); err == nil && !m.Started.IsZero() {
		started = m.Started
	}
	exp, err := otelexport.NewExporter(ctx, l.f.target(), os.Getenv)
	if err != nil {
		return // the export at the end says why
	}
	live, err := otelexport.NewLive(ctx, filepath.Base(runDir), started, exp, nil, liveOrigins(runDir))
	if err != nil {
		return
	}
	relay, err := otelexport.NewLiveRelay(ctx, l.f.target(), os.Getenv)
	if err != nil {
		relay = nil // the end sends it all, and says why if it cannot
	}
	l.mu.Lock()
	l.live, l.relay, l.exp, l.runDir = live, relay, exp, runDir
	l.mu.Unlock()
	redact := liveRedaction(runRedact, os.Environ())
	r := follow.NewRun(runDir, nil)
	r.Redact = redact
	add := func(it follow.Item) {
		if it.Event != nil {
			live.Add(*it.Event)
		}
	}
	spool := spoolLines(runDir)
	poll := func() {
		r.Poll(false, add)
		if relay != nil {
			relayPoll(spool, relay, redact)
		}
	}
	t := time.NewTicker(liveInterval)
	defer t.Stop()
	for {
		poll()
		select {
		case <-ctx.Done():
			poll() // what was written up to the workload's end
			return
		case <-t.C:
		}
	}
}

// relayPoll hands relay the lines the gateway's spool gained, redacted as
// the harness redacts the record it collects.
func relayPoll(spool *follow.Lines, relay *otelexport.LiveRelay, redact func([]byte) []byte) {
	spool.Poll(false, func(ln follow.Line) {
		if ln.Data == nil {
			return // a problem: the record the harness collects has it, and the end
		}
		data := ln.Data
		if redact != nil {
			data = redact(data)
		}
		relay.Add(ln.N, data)
	})
}

// spoolLines reads the gateway's spool of the agent's relayed telemetry
// as it grows, in lines as long as a relayed payload may be.
func spoolLines(runDir string) *follow.Lines {
	ls := follow.NewLines(follow.Files(runDir, follow.Record{Role: "gateway", File: runs.FileAgentTelemetry}))
	ls.Max = otelexport.MaxRelayLine
	return ls
}

// finish sends what the live export did not, bounded by ctx. ok is false
// when the live export never started (the caller then exports the run
// whole).
func (l *liveExport) finish(ctx context.Context, runDir string) (otelexport.Stats, bool, error) {
	if l == nil {
		return otelexport.Stats{}, false, nil
	}
	l.mu.Lock()
	live, exp, dir := l.live, l.exp, l.runDir
	l.mu.Unlock()
	if live == nil || dir != runDir {
		return otelexport.Stats{}, false, nil
	}
	tl, err := timeline.Build(runDir)
	if err != nil {
		return otelexport.Stats{}, true, err
	}
	st, err := live.Finish(ctx, tl, exp, nil)
	if err == nil && st.Moved > 0 {
		fmt.Fprintf(l.errW, "warning: OpenTelemetry export: %d spans sent during the run hang elsewhere in the finished record (a correlation id reused after them); mcpsidecar runs export sends the record's\n", st.Moved)
	}
	return st, true, err
}

// relayed stops the live relay of the agent's own telemetry, bounded by
// ctx, and says which spool lines the collector took (nil: none).
func (l *liveExport) relayed(ctx context.Context, runDir string) func(int) bool {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	relay, dir := l.relay, l.runDir
	l.mu.Unlock()
	if relay == nil || dir != runDir {
		return nil
	}
	return relay.Finish(ctx)
}

// liveRedaction is what the live export removes from what it sends: the
// run's own secrets (credentials included, whatever their variable's
// name: red team, session 38, a credential read from GITHUB_PAT reached
// the collector in clear), then any secret-named value of this host's.
func liveRedaction(run sandbox.Redactor, environ []string) func([]byte) []byte {
	host := hostSecrets(environ)
	return func(b []byte) []byte {
		if run != nil {
			b = run(b)
		}
		if host != nil {
			b = host(b)
		}
		return b
	}
}
