package caplog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var errTestFull = errors.New("test log full")

// line is what the tests write: a sequence number, and the marker's
// fields.
type line struct {
	N       int    `json:"n"`
	Pad     string `json:"pad,omitempty"`
	LogFull bool   `json:"log_full,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func opts(budget int64) Options {
	return Options{Name: "test log", Full: errTestFull, Budget: budget}
}

// marker names the lost line n; brief drops the name.
func marker(n int) Marker {
	return func(why error, brief bool) any {
		if brief {
			return line{LogFull: true, Reason: "full"}
		}
		return line{LogFull: true, Reason: fmt.Sprintf("full: %v; lost line %d", why, n)}
	}
}

func encode(t testing.TB, l line) []byte {
	t.Helper()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// decode parses every line of log, failing t on one that does not parse,
// and checks that only the last one is the marker (when full).
func decode(t *testing.T, log string, full bool) []line {
	t.Helper()
	var out []line
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	for i, s := range lines {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("line %d %q: %v", i+1, s, err)
		}
		if want := full && i == len(lines)-1; l.LogFull != want {
			t.Errorf("line %d: log_full %v, want %v", i+1, l.LogFull, want)
		}
		out = append(out, l)
	}
	return out
}

// TestCapReachedExactly: a line that ends exactly at the budget is
// written; the next one, however short, fills the log, which writes the
// marker naming it and refuses everything after.
func TestCapReachedExactly(t *testing.T) {
	first := encode(t, line{N: 1})
	budget := int64(3 * (len(first) + 1))
	var buf syncBuffer
	l := New(&buf, opts(budget))
	for n := 1; n <= 3; n++ {
		if err := l.Write(encode(t, line{N: n}), marker(n)); err != nil {
			t.Fatalf("line %d (within the budget): %v", n, err)
		}
	}
	if got := int64(len(buf.String())); got != budget {
		t.Fatalf("wrote %d bytes, want exactly the %d-byte budget", got, budget)
	}
	if l.Full() != nil {
		t.Fatalf("Full() = %v at exactly the budget, want nil", l.Full())
	}
	err := l.Write(encode(t, line{N: 4}), marker(4))
	if !errors.Is(err, errTestFull) || !strings.Contains(err.Error(), "budget is reached") {
		t.Fatalf("line 4 = %v, want the budget reached", err)
	}
	if !errors.Is(l.Full(), errTestFull) {
		t.Errorf("Full() = %v", l.Full())
	}
	after := buf.String()
	if err := l.Write(encode(t, line{N: 5}), marker(5)); !errors.Is(err, errTestFull) {
		t.Errorf("line 5 after the marker = %v, want refused", err)
	}
	if buf.String() != after {
		t.Errorf("the log grew after its marker: %q", strings.TrimPrefix(buf.String(), after))
	}
	got := decode(t, after, true)
	if len(got) != 4 || !strings.Contains(got[3].Reason, "lost line 4") {
		t.Errorf("lines %+v: want 3 lines and the marker naming line 4", got)
	}
	if int64(len(after)) > budget+Headroom {
		t.Errorf("log is %d bytes, over the budget plus the headroom", len(after))
	}
}

// TestLineBiggerThanTheRestOfTheBudget: a line longer than what is left
// is not written in part: the log ends with the lines before it and the
// marker.
func TestLineBiggerThanTheRestOfTheBudget(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, opts(100))
	if err := l.Write(encode(t, line{N: 1}), marker(1)); err != nil {
		t.Fatal(err)
	}
	err := l.Write(encode(t, line{N: 2, Pad: strings.Repeat("x", 200)}), marker(2))
	if !errors.Is(err, errTestFull) {
		t.Fatalf("Write = %v, want %v", err, errTestFull)
	}
	if strings.Contains(buf.String(), "xxx") {
		t.Error("part of the line over the budget was written")
	}
	got := decode(t, buf.String(), true)
	if len(got) != 2 || got[0].N != 1 || !strings.Contains(got[1].Reason, "lost line 2") {
		t.Errorf("lines %+v: want line 1 and the marker naming line 2", got)
	}
}

// TestMarkerFitsHeadroom: a marker whose long form would pass the
// headroom is written in its brief form.
func TestMarkerFitsHeadroom(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, opts(1))
	long := func(why error, brief bool) any {
		if brief {
			return line{LogFull: true, Reason: "brief"}
		}
		return line{LogFull: true, Reason: strings.Repeat("\x01", Headroom)}
	}
	if err := l.Write(encode(t, line{N: 1}), long); !errors.Is(err, errTestFull) {
		t.Fatalf("Write = %v", err)
	}
	if got := decode(t, buf.String(), true); len(got) != 1 || got[0].Reason != "brief" {
		t.Errorf("log %q: want only the brief marker", buf.String())
	}
}

// cutWriter writes the first n bytes of its first write, then fails
// with err, as write(2) does at RLIMIT_FSIZE; later writes succeed.
type cutWriter struct {
	syncBuffer
	n      int
	err    error
	failed bool
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if !w.failed {
		w.failed = true
		w.syncBuffer.Write(p[:w.n])
		return w.n, w.err
	}
	return w.syncBuffer.Write(p)
}

// TestWriteErrorFills: a failed write fills the log like the budget does,
// and the marker starts a line of its own after the cut one.
func TestWriteErrorFills(t *testing.T) {
	w := &cutWriter{n: 5, err: syscall.EIO}
	l := New(w, opts(1<<20))
	err := l.Write(encode(t, line{N: 1}), marker(1))
	if !errors.Is(err, errTestFull) || !strings.Contains(err.Error(), "writing test log: input/output error") {
		t.Fatalf("Write = %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) != 5 {
		t.Fatalf("log %q: want the cut line, then the marker", w.String())
	}
	decode(t, lines[1], true)
	if err := l.Write(encode(t, line{N: 2}), marker(2)); !errors.Is(err, errTestFull) {
		t.Errorf("Write after the failed write = %v, want refused", err)
	}
}

// TestConcurrentWriters: lines written from many goroutines are whole,
// never interleaved, all there up to the marker, and exactly one marker
// ends the log.
func TestConcurrentWriters(t *testing.T) {
	const writers, each = 16, 200
	one := int64(len(encode(t, line{N: writers * each})) + 1)
	budget := one * writers * each / 2 // about half the lines fit
	var buf syncBuffer
	l := New(&buf, opts(budget))
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := map[int]bool{}
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := g*each + i + 1
				if err := l.Write(encode(t, line{N: n}), marker(n)); err == nil {
					mu.Lock()
					written[n] = true
					mu.Unlock()
				} else if !errors.Is(err, errTestFull) {
					t.Errorf("line %d: %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
	got := decode(t, buf.String(), true)
	if len(got)-1 != len(written) {
		t.Errorf("%d lines in the log before the marker, %d writes accepted", len(got)-1, len(written))
	}
	for _, g := range got[:len(got)-1] {
		if !written[g.N] {
			t.Errorf("line %d in the log, but its Write was refused", g.N)
		}
	}
	if size := int64(len(buf.String())); size > budget+Headroom {
		t.Errorf("log is %d bytes, over %d + headroom", size, budget)
	}
}

// TestOpenCountsWhatIsThere: the bytes already in the file count against
// the budget; the file is created 0600, appended to, synced and closed by
// Close, and a line after Close is refused and reported.
func TestOpenCountsWhatIsThere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	old := append(encode(t, line{N: 0}), '\n')
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, 0, opts(2*int64(len(old))))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(encode(t, line{N: 1}), marker(1)); err != nil {
		t.Fatalf("line 1 (fits with what was there): %v", err)
	}
	if err := l.Write(encode(t, line{N: 2}), marker(2)); !errors.Is(err, errTestFull) {
		t.Fatalf("line 2 = %v, want the budget reached", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := l.Write(encode(t, line{N: 3}), marker(3)); !errors.Is(err, errTestFull) {
		t.Errorf("Write after Close = %v, want refused", err)
	}
	if err := l.Close(); err == nil || !strings.Contains(err.Error(), "written after close") {
		t.Errorf("second Close = %v, want the line written after close reported", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, string(b), true); len(got) != 3 || got[0].N != 0 || got[1].N != 1 {
		t.Errorf("file %q: want the old line, line 1 and the marker", b)
	}
}

// TestOpenCreatesPrivateFile: a new log is mode 0600.
func TestOpenCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	l, err := Open(path, 0, opts(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestNewHasNothingToClose: Close of a log over the caller's writer
// closes nothing, and refuses later lines.
func TestNewHasNothingToClose(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, opts(1<<20))
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := l.Write(encode(t, line{N: 1}), marker(1)); !errors.Is(err, errTestFull) {
		t.Errorf("Write after Close = %v, want refused", err)
	}
	if buf.String() != "" {
		t.Errorf("written after close: %q", buf.String())
	}
}
