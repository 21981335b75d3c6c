//go:build linux

package caplog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBudgetFollowsFsize: a role's RLIMIT_FSIZE below the budget lowers
// it, read at the first write (after the role set its limits), so the
// file ends with a whole marker line within the limit instead of a line
// cut by EFBIG. (The Go runtime ignores SIGXFSZ, so a write past the
// limit would fail with EFBIG and the test would say so.)
func TestBudgetFollowsFsize(t *testing.T) {
	const limit = 64 << 10
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Cur != ^uint64(0) && old.Cur < limit {
		t.Fatalf("RLIMIT_FSIZE is already %d, below the test's %d: run the test without a file size limit", old.Cur, limit)
	}
	path := filepath.Join(t.TempDir(), "log.jsonl")
	l, err := Open(path, 0, opts(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	lowered := old
	lowered.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lowered); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	pad := strings.Repeat("p", 700)
	var werr error
	n := 0
	for werr == nil && n < 1000 {
		n++
		werr = l.Write(encode(t, line{N: n, Pad: pad}), marker(n))
	}
	if !errors.Is(werr, errTestFull) || !strings.Contains(werr.Error(), "budget is reached") {
		t.Fatalf("Write = %v after %d lines, want the budget (lowered to the file size limit) reached", werr, n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > limit {
		t.Errorf("file is %d bytes, over the %d-byte limit", len(b), limit)
	}
	if len(b) < limit-Headroom-800 {
		t.Errorf("file is %d bytes: the budget was lowered further than the limit minus the headroom", len(b))
	}
	decode(t, string(b), true)
}

// TestNewIgnoresFsize: a log over the caller's writer keeps its budget
// whatever the file size limit (the writer need not be a file).
func TestNewIgnoresFsize(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lowered := old
	lowered.Cur = 8 << 10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lowered); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	var buf syncBuffer
	l := New(&buf, opts(1<<20))
	for n := 1; n <= 100; n++ {
		if err := l.Write(encode(t, line{N: n, Pad: strings.Repeat("p", 200)}), marker(n)); err != nil {
			t.Fatalf("line %d: %v (the budget followed the file size limit)", n, err)
		}
	}
}
