package timeline

import "fmt"

// What a watcher needs to stream a run's events while it goes
// (internal/progress): the same parsing Build does, one line at a time.

// LineFiles are the JSONL sources the roles write while a run goes, in the
// order Build reads them.
func LineFiles() []string {
	out := make([]string, len(lineSources))
	for i, s := range lineSources {
		out[i] = s.file
	}
	return out
}

// MaxLineBytes bounds one JSONL line; Build skips longer ones.
const MaxLineBytes = maxLineBytes

// ParseLine turns one line of a JSONL source (one of [LineFiles]) into its
// event, exactly as Build would, without a Seq and unlinked. n is the
// line's 1-based number in its file. An invalid line is an error, which
// Build would report as a problem.
func ParseLine(file string, line []byte, n int) (Event, error) {
	for _, src := range lineSources {
		if src.file != file {
			continue
		}
		if len(line) == 0 {
			return Event{}, fmt.Errorf("empty line")
		}
		if len(line) > maxLineBytes {
			return Event{}, fmt.Errorf("line longer than %d bytes", maxLineBytes)
		}
		b := &builder{t: &Timeline{}, r: &sourceReader{}}
		if err := src.parse(b, line, n); err != nil {
			return Event{}, err
		}
		return b.t.Events[0], nil
	}
	return Event{}, fmt.Errorf("%s is not a line source", file)
}

// PhaseEvent is the event of one harness phase, as Build makes it from
// run-metadata.json.
func PhaseEvent(p PhaseInfo) Event {
	return Event{Schema: Schema, Time: p.Start, DurationMS: p.DurationMS, Source: SourceHarness, Kind: KindPhase,
		OK: p.OK, Name: p.Name, Error: p.Error, Summary: phaseSummary(p), File: FileRunMetadata}
}

// ProblemEvent is the timeline.jsonl line that reports a problem with a
// source (a torn, invalid or oversized line).
func ProblemEvent(file string, line int, message string) Event {
	return Event{Schema: Schema, Source: SourceTimeline, Kind: KindSourceProblem, Summary: message, File: file, Line: line}
}
