package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// KindSourceProblem marks a timeline.jsonl line that reports a problem
// with a source (missing file, torn or invalid line) instead of an event.
const KindSourceProblem = "source_problem"

// SourceTimeline is the source of the lines this package adds itself.
const SourceTimeline = "timeline"

// Write builds the run directory's timeline and writes timeline.jsonl and
// report.html into it. Problems with the sources are reported inside both
// files; only a failure to read the directory or to write is an error.
func Write(runDir string) error {
	t, err := Build(runDir)
	if err != nil {
		return err
	}
	return t.WriteFiles(runDir)
}

// WriteFiles writes the timeline's timeline.jsonl and report.html into dir.
func (t *Timeline) WriteFiles(dir string) error {
	var jl, page bytes.Buffer
	if err := t.WriteJSONL(&jl); err != nil {
		return err
	}
	if err := t.WriteHTML(&page); err != nil {
		return err
	}
	if err := replaceFile(dir, FileTimeline, jl.Bytes()); err != nil {
		return err
	}
	return replaceFile(dir, FileReport, page.Bytes())
}

// WriteJSONL writes timeline.jsonl: one event a line in time order, then
// one source_problem line per problem. Every line carries the schema.
func (t *Timeline) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range t.Events {
		if err := enc.Encode(&t.Events[i]); err != nil {
			return fmt.Errorf("encoding event %d: %w", t.Events[i].Seq, err)
		}
	}
	for i, p := range t.Problems {
		e := Event{Schema: Schema, Seq: len(t.Events) + i + 1, Source: SourceTimeline, Kind: KindSourceProblem,
			Summary: p.Message, File: p.File, Line: p.Line}
		if err := enc.Encode(&e); err != nil {
			return fmt.Errorf("encoding problem: %w", err)
		}
	}
	return nil
}

// replaceFile writes data to dir/name through a new temporary file that is
// renamed over the target. The temporary file is created exclusively and
// rename replaces a directory entry without following it, so a symbolic
// link the workload planted at the target is replaced, never written
// through.
func replaceFile(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
