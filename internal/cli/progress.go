package cli

import (
	"fmt"
	"os"
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
	if !o.quiet {
		po.Lines = s.Err
	}
	var file *os.File
	switch o.events {
	case "":
	case "-":
		if o.json {
			return nil, usageErrorf("--events - and --json both write to stdout: give --events a file")
		}
		po.Events, out.Out = s.Out, s.Err // stdout carries the events
	default:
		f, err := os.OpenFile(o.events, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, usageErrorf("--events %s: %v", o.events, pathErr(err))
		}
		file, po.Events = f, f
	}
	w := progress.New(po)
	so.Watch = w.Watch
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
