package follow

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// maxReadPerPoll bounds what one poll reads of one record, so one record
// written faster than it is read cannot starve the others.
const maxReadPerPoll = 1 << 20

// Line is one complete line of a record, or a problem with the record.
type Line struct {
	Source string // the record's name
	N      int    // 1-based line number; 0 for a problem with the whole record
	Data   []byte // the line, trimmed; nil for a problem
	// Problem says what is wrong (a torn or overlong line, a record that
	// was replaced or cannot be read); empty for a line.
	Problem string
	// Err is the error of a problem with the whole record: [ErrRestarted],
	// or the [Source]'s (such as [ErrTooLarge], [ErrNotRegular]); nil for
	// a line or a problem with one line.
	Err error
	// Final marks a last line read without its newline at the run's end.
	Final bool
}

// ErrRestarted is the error of a record that was replaced or truncated
// while it was followed: it is read again from its start.
var ErrRestarted = errors.New("the record was replaced or truncated during the run; following it from its start")

// Lines cuts a [Source] into lines.
type Lines struct {
	// Max bounds one line (0: [timeline.MaxLineBytes], the bound of the
	// logs the timeline reads); a longer one is skipped as a problem.
	Max      int
	src      Source
	n        int
	partial  []byte
	skipping bool // inside an overlong line: drop until its newline
	failed   string
}

// NewLines reads src line by line.
func NewLines(src Source) *Lines { return &Lines{src: src} }

// Poll reads what the record gained and calls fn for each complete line
// and each problem. final (the run ended: nothing more will be written)
// also hands over a last line without its newline, marked Final.
func (l *Lines) Poll(final bool, fn func(Line)) {
	data, restarted, err := l.src.Read(maxReadPerPoll)
	if restarted {
		fn(l.recordProblem(ErrRestarted))
		l.n, l.partial, l.skipping = 0, nil, false
	}
	if err != nil {
		// Said once per distinct error: a poll every 100 ms must not
		// repeat it.
		if msg := err.Error(); msg != l.failed {
			l.failed = msg
			fn(l.recordProblem(err))
		}
	}
	l.feed(data, fn)
	for final && len(data) == maxReadPerPoll {
		data, _, _ = l.src.Read(maxReadPerPoll)
		l.feed(data, fn)
	}
	if final {
		l.endTorn(fn)
	}
}

func (l *Lines) max() int {
	if l.Max > 0 {
		return l.Max
	}
	return timeline.MaxLineBytes
}

func (l *Lines) recordProblem(err error) Line {
	return Line{Source: l.src.Name(), Problem: err.Error(), Err: err}
}

func (l *Lines) problem(n int, msg string) Line {
	return Line{Source: l.src.Name(), N: n, Problem: msg}
}

// feed splits data into lines, keeping an unfinished one for later.
func (l *Lines) feed(data []byte, fn func(Line)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !l.skipping {
				l.partial = append(l.partial, data...)
				if len(l.partial) > l.max() {
					l.partial, l.skipping = nil, true
				}
			}
			return
		}
		chunk := data[:i]
		data = data[i+1:]
		l.n++
		if l.skipping || len(l.partial)+len(chunk) > l.max() {
			l.partial, l.skipping = nil, false
			fn(l.problem(l.n, fmt.Sprintf("line longer than %d bytes skipped", l.max())))
			continue
		}
		line := bytes.TrimSpace(append(l.partial, chunk...))
		l.partial = nil
		if len(line) > 0 {
			fn(Line{Source: l.src.Name(), N: l.n, Data: line})
		}
	}
}

// endTorn hands over the last line without a newline, or says it was
// overlong.
func (l *Lines) endTorn(fn func(Line)) {
	if !l.skipping && len(bytes.TrimSpace(l.partial)) == 0 {
		l.partial = nil
		return
	}
	l.n++
	if l.skipping {
		fn(l.problem(l.n, fmt.Sprintf("torn last line longer than %d bytes skipped", l.max())))
	} else {
		fn(Line{Source: l.src.Name(), N: l.n, Data: bytes.TrimSpace(l.partial), Final: true})
	}
	l.partial, l.skipping = nil, false
}
