package follow

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// Records are the records a run appends to while it goes, and the role
// whose output directory holds each. The gateway's comes last, so that a
// poll has read the calls before the decisions they caused.
var Records = []Record{
	{Role: "agent", File: runs.FileAgentTurns},
	{Role: "sidecar", File: runs.FileAudit},
	{Role: "gateway", File: runs.FileDecisions},
}

// Record is one record of a run: File in Role's output directory.
type Record struct{ Role, File string }

// Opener gives the [Source] of a record of the run in dir. [Files] reads
// the role's output directory on this host; a backend that keeps the
// output elsewhere (an engine volume) gives its own.
type Opener func(dir string, r Record) Source

// Files is the [Opener] of records in each role's output directory on
// this host (<run dir>/<role>/<file>).
func Files(dir string, r Record) Source {
	return NewFile(filepath.Join(dir, r.Role, r.File), r.File)
}

// Item is one thing read from a running run: an event or a problem.
type Item struct {
	Event   *timeline.Event
	Problem *timeline.Problem
	// Seen is when it was read: the tail's delay is Seen - Event.Time.
	Seen time.Time
}

// Run follows one run directory.
type Run struct {
	Dir string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Redact removes secret values from each line before it is parsed
	// (nil: none): a running run's logs have not been through the
	// harness's redaction yet, which it applies when it collects them.
	Redact func([]byte) []byte
	recs   []*followed
}

type followed struct {
	rec   Record
	src   Source
	lines *Lines
	any   bool // some data or a problem came from src
}

// NewRun follows the run in dir through open (nil: [Files]).
func NewRun(dir string, open Opener) *Run {
	if open == nil {
		open = Files
	}
	r := &Run{Dir: dir, Now: time.Now}
	for _, rec := range Records {
		src := open(dir, rec)
		r.recs = append(r.recs, &followed{rec: rec, src: src, lines: NewLines(src)})
	}
	return r
}

// Ended reports whether the run in dir has ended: the harness wrote its
// timeline.jsonl, the last thing it writes, after the final
// run-metadata.json.
func Ended(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, runs.FileTimeline))
	return err == nil
}

// Poll reads what the records gained and calls fn with each event and
// problem, record by record. final (the run ended) reads each record to
// its end; a record whose live source never showed anything is read from
// the copy the harness collected into the run directory, so a backend
// whose output is not visible while the run goes still gives the whole
// record at its end.
func (r *Run) Poll(final bool, fn func(Item)) {
	for _, f := range r.recs {
		if final && !f.any {
			if _, err := os.Lstat(filepath.Join(r.Dir, f.rec.File)); err == nil {
				f.src = NewFile(filepath.Join(r.Dir, f.rec.File), f.rec.File)
				f.lines = NewLines(f.src)
			}
		}
		f.lines.Poll(final, func(l Line) {
			f.any = true
			fn(r.item(f.rec, l))
		})
	}
}

func (r *Run) item(rec Record, l Line) Item {
	now := r.Now()
	if l.Problem != "" {
		return Item{Problem: &timeline.Problem{File: rec.File, Line: l.N, Message: l.Problem}, Seen: now}
	}
	data := l.Data
	if r.Redact != nil {
		data = r.Redact(data)
	}
	e, err := timeline.ParseLine(rec.File, data, l.N)
	if err != nil {
		what := "invalid line skipped: "
		if l.Final {
			what = "torn last line (no newline) skipped: "
		}
		return Item{Problem: &timeline.Problem{File: rec.File, Line: l.N, Message: what + err.Error()}, Seen: now}
	}
	e.Schema = timeline.Schema
	return Item{Event: &e, Seen: now}
}

// Follow polls the run every interval and calls fn with what it reads,
// until the run ends (then it reads every record to its end and returns
// nil) or ctx ends (it returns ctx's error).
func (r *Run) Follow(ctx context.Context, interval time.Duration, fn func(Item)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		// Looked at before the poll: everything the roles wrote was
		// written before the end marker, so this poll reads it all.
		ended := Ended(r.Dir)
		r.Poll(ended, fn)
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
