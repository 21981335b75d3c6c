package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/progress"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// addProgressFlags adds run's --events.
func addProgressFlags(cmd *cobra.Command, o *sandboxOptions) {
	cmd.Flags().StringVar(&o.events, "events", "", `stream the run's events as JSON lines (timeline.jsonl's schema) to FILE, or to stdout with "-" (the workload's stdout then goes to stderr), while the run goes`)
}

// watchProgress hooks the progress watcher (internal/progress) into the
// lifecycle of a command with progress (run): one line per model turn and tool call on stderr
// (none under --quiet) and, with --events, every event as a JSON line.
// The returned function ends the stream; it reports a failure to write it.
func (o sandboxOptions) watchProgress(so *sandbox.Options, s Streams, out *sandbox.Output) (func() error, error) {
	if !o.progress {
		return func() error { return nil }, nil
	}
	po := progress.Options{Start: time.Now()}
	rw := &redactingWriters{}
	if !o.quiet {
		po.Lines = rw.wrap(s.Err)
	}
	var file *os.File
	switch o.events {
	case "":
	case "-":
		if o.json {
			return nil, usageErrorf("--events - and --json both write to stdout: give --events a file")
		}
		po.Events, out.Out = rw.wrap(s.Out), s.Err // stdout carries the events
	default:
		f, err := os.OpenFile(o.events, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, usageErrorf("--events %s: %v", o.events, pathErr(err))
		}
		file, po.Events = f, rw.wrap(f)
	}
	w := progress.New(po)
	so.Watch = func(ctx context.Context, runDir string, redact sandbox.Redactor) {
		rw.set(redact) // what the lines and events quote of the roles' logs leaves without the run's secrets
		w.Watch(ctx, runDir)
	}
	prev := so.OnPhase
	so.OnPhase = func(p runs.Phase) {
		if prev != nil {
			prev(p)
		}
		w.Phase(timeline.PhaseInfo{Name: p.Name, Start: p.Start, DurationMS: p.DurationMS, OK: p.OK, Error: p.Error})
	}
	return func() error {
		err := w.Err()
		if file != nil {
			if cerr := file.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("closing --events %s: %w", o.events, cerr)
			}
		}
		if err != nil {
			fmt.Fprintf(s.Err, "warning: %v\n", err)
		}
		return err
	}, nil
}

// pathErr is an *os.PathError's reason without Go's "open NAME:" prefix.
func pathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// redactingWriters are the progress streams, each write passed through the
// run's redaction once the run has one (sandbox.Options.Watch); before
// that, phase lines carry no value of the run's.
type redactingWriters struct {
	mu     sync.Mutex
	redact sandbox.Redactor
}

func (rw *redactingWriters) set(r sandbox.Redactor) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.redact = r
}

func (rw *redactingWriters) wrap(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		rw.mu.Lock()
		r := rw.redact
		rw.mu.Unlock()
		if r == nil {
			return w.Write(p)
		}
		if _, err := w.Write(r(p)); err != nil {
			return 0, err
		}
		return len(p), nil
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
