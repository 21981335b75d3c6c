package caplog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Headroom is what a log keeps free under its hard limit for its last
// line, the log-full marker (which its [Marker] bounds well below).
const Headroom = 4 << 10

// Options are what a log is called and how much it may write.
type Options struct {
	// Name names the log in errors ("decision log").
	Name string
	// Full is the error every refusal wraps (egress.ErrLogFull).
	Full error
	// Budget is the most bytes the file may hold, those there at open
	// included; the marker line is written beyond it, in [Headroom].
	Budget int64
}

// A Marker builds the log's last line, the one that says it filled and
// why, for the line that found it full. brief asks for a bounded form:
// Log asks for it when the full form would not fit the headroom (JSON
// escapes can make a short name long). Log marshals what it returns.
type Marker func(why error, brief bool) any

// Log writes lines, one Write call each, under a mutex, so a line is
// never interleaved with another and a crash loses at most the line being
// written. It is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	o       Options
	w       io.Writer
	f       *os.File // the file Open opened, synced and closed by Close
	size    int64    // bytes in the file, including those there at open
	fsize   bool     // lower the budget to RLIMIT_FSIZE at the first write
	full    error    // why the log is full; nil while it is not
	partial bool     // the last write was cut short: the file ends mid-line
	closed  bool
	err     error // what went wrong closing, and lines written after
}

// New writes to w; the caller keeps ownership of w.
func New(w io.Writer, o Options) *Log {
	return &Log{o: o, w: w}
}

// Open appends to the file at path, creating it (mode 0600); flag is
// added to the open flags (runs.NoFollow, to refuse a planted link). The
// bytes already in the file count against the budget, and the budget
// follows the process's file size limit.
func Open(path string, flag int, o Options) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|flag, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Log{o: o, w: f, f: f, size: fi.Size(), fsize: true}, nil
}

// SetBudget lowers the log's byte budget to n; it never raises it.
func (l *Log) SetBudget(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.o.Budget = min(l.o.Budget, n)
}

// Full is why the log is full (wrapping [Options.Full]), or nil.
func (l *Log) Full() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.full
}

// Write appends line and a newline. Once the log is full it writes
// nothing and returns why (wrapping [Options.Full]); the line that finds
// it full (over the budget, or a failed write) makes it write marker's
// line first. A line written after Close is refused, and Close reports it.
func (l *Log) Write(line []byte, marker Marker) error {
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.err = errors.Join(l.err, fmt.Errorf("%s line written after close", l.o.Name))
		return fmt.Errorf("%w: written after close", l.o.Full)
	}
	if l.full != nil {
		return l.full
	}
	l.lowerToFsize()
	if l.size+int64(len(line)) > l.o.Budget {
		l.fill(marker, fmt.Errorf("%w: the %d-byte budget is reached (%d bytes written)", l.o.Full, l.o.Budget, l.size))
		return l.full
	}
	n, err := l.w.Write(line)
	l.size += int64(n)
	if err != nil {
		l.partial = n > 0 && n < len(line)
		l.fill(marker, fmt.Errorf("%w: writing %s: %v", l.o.Full, l.o.Name, err))
		return l.full
	}
	return nil
}

// lowerToFsize lowers the budget, once, to the process's file size limit
// minus the headroom: read at the first write, as the role sets its
// limits (hardening) after it opened the log.
func (l *Log) lowerToFsize() {
	if !l.fsize {
		return
	}
	l.fsize = false
	limit, ok := fsizeLimit()
	if !ok || limit > uint64(l.o.Budget)+Headroom {
		return
	}
	l.o.Budget = max(int64(limit)-Headroom, 0)
}

// fill marks the log full with why and writes marker's line in the
// headroom, on a line of its own when the file ended mid-line.
func (l *Log) fill(marker Marker, why error) {
	l.full = why
	b, err := json.Marshal(marker(why, false))
	if len(b) >= Headroom-2 {
		// The marker must fit the headroom, or the file passes what
		// the host copies of it.
		b, err = json.Marshal(marker(why, true))
	}
	if err != nil {
		return
	}
	b = append(b, '\n')
	if l.partial {
		b = append([]byte{'\n'}, b...)
	}
	n, _ := l.w.Write(b)
	l.size += int64(n)
}

// Close syncs the file Open opened to stable storage and closes it, and
// refuses every later line. It reports what failed: syncing, closing, and
// (on a later call) lines written after close; a log over the caller's
// writer has nothing to close.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.err
	}
	l.closed = true
	if l.f != nil {
		if err := l.f.Sync(); err != nil {
			l.err = errors.Join(l.err, fmt.Errorf("syncing %s: %w", l.o.Name, err))
		}
		if err := l.f.Close(); err != nil {
			l.err = errors.Join(l.err, fmt.Errorf("closing %s: %w", l.o.Name, err))
		}
	}
	return l.err
}
