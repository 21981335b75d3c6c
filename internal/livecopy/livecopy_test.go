package livecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestWriteGrow: the live copy grows by what the source gained, in place
// (same file), and starts over when the source is shorter.
func TestWriteGrow(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	write := func(s string) {
		t.Helper()
		if err := WriteGrow(root, "log.jsonl", strings.NewReader(s), int64(len(s))); err != nil {
			t.Fatal(err)
		}
	}
	write("a\n")
	before, _ := os.Stat(filepath.Join(dir, "log.jsonl"))
	write("a\nb\n")
	after, _ := os.Stat(filepath.Join(dir, "log.jsonl"))
	if got, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(got) != "a\nb\n" || !os.SameFile(before, after) {
		t.Errorf("after growth: %q (same file %v)", got, os.SameFile(before, after))
	}
	write("x\n")
	if got, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(got) != "x\n" {
		t.Errorf("after a shorter source: %q", got)
	}
	write("y\nc\n") // the prefix changed: rewritten, not appended to
	last, _ := os.Stat(filepath.Join(dir, "log.jsonl"))
	if got, _ := os.ReadFile(filepath.Join(dir, "log.jsonl")); string(got) != "y\nc\n" || !os.SameFile(before, last) {
		t.Errorf("after a changed prefix: %q (same file %v)", got, os.SameFile(before, last))
	}
}

// TestRemoveStale: after the final read, a live copy the read did not
// write (the role deleted the file, or swapped it for a FIFO, at the end)
// is removed and said; what the read wrote and what was never copied are
// left alone.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"answer.txt", "agent-turns.jsonl", "kept.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("early copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	problems := RemoveStale(root, []string{"answer.txt", "agent-turns.jsonl", "kept.json", "never.json"}, []string{"kept.json"})
	for _, n := range []string{"answer.txt", "agent-turns.jsonl"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the stale live copy is still there (%v)", n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "kept.json")); err != nil {
		t.Errorf("the file the read wrote is gone: %v", err)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "answer.txt") || !strings.Contains(problems[1], "live copy") {
		t.Errorf("problems %q, want one per removed copy", problems)
	}
}

// volume is a role's output as a Source sees it: files a test changes
// while the live copy runs, read as the holder's tar.
type volume struct {
	mu    sync.Mutex
	dir   string
	reads int
}

func (v *volume) write(t *testing.T, name, data string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := os.WriteFile(filepath.Join(v.dir, name), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (v *volume) source(ctx context.Context, role string, names []string, w io.Writer) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reads++
	return holder.WriteOutput(w, v.dir, names, runs.MaxCopyBytes, io.Discard)
}

func runDir(t *testing.T, role string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, role), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStartGrowsTheCopy: while it runs, the copy in the run directory
// follows the role's log as it grows, as the same file (a tail follows
// it by inode); stopping with last copies once more.
func TestStartGrowsTheCopy(t *testing.T) {
	defer func(e time.Duration) { Every = e }(Every)
	Every = 20 * time.Millisecond
	v := &volume{dir: t.TempDir()}
	dir := runDir(t, "gateway")
	copyPath := filepath.Join(dir, "gateway", runs.FileDecisions)
	stop := Start(context.Background(), dir, []string{"gateway"}, v.source, t.Logf)
	waitFor := func(want string) os.FileInfo {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if got, _ := os.ReadFile(copyPath); string(got) == want {
				st, _ := os.Stat(copyPath)
				return st
			}
			if time.Now().After(deadline) {
				got, _ := os.ReadFile(copyPath)
				t.Fatalf("the live copy holds %q, want %q", got, want)
			}
		}
	}
	v.write(t, runs.FileDecisions, "one\n")
	first := waitFor("one\n")
	v.write(t, runs.FileDecisions, "one\ntwo\n")
	if second := waitFor("one\ntwo\n"); !os.SameFile(first, second) {
		t.Error("the copy was replaced, not grown: a tail following it would lose its place")
	}
	stop(false)
	v.write(t, runs.FileDecisions, "one\ntwo\nthree\n")
	time.Sleep(5 * Every)
	if got, _ := os.ReadFile(copyPath); string(got) != "one\ntwo\n" {
		t.Errorf("after stop(false) the copy changed: %q", got)
	}
	// A second copier over the same folder, stopped with its last copy
	// at once: the copy is current without a tick.
	Every = time.Hour
	Start(context.Background(), dir, []string{"gateway"}, v.source, t.Logf)(true)
	if got, _ := os.ReadFile(copyPath); string(got) != "one\ntwo\nthree\n" {
		t.Errorf("after stop(true) the copy is %q, want the last content", got)
	}
}

// TestStartSkipsRolesWithoutLogs: a role that writes no log the harness
// collects (runs.RoleFiles) is never read.
func TestStartSkipsRolesWithoutLogs(t *testing.T) {
	v := &volume{dir: t.TempDir()}
	dir := runDir(t, "nolog")
	Start(context.Background(), dir, []string{"nolog"}, v.source, t.Logf)(true)
	if v.reads != 0 {
		t.Errorf("a role without logs was read %d times", v.reads)
	}
}

// TestBudget: the live copy of a role stops once it has read its budget
// (each tick reads the logs whole), with a note; without the budget it
// copies at every tick.
func TestBudget(t *testing.T) {
	defer func(e time.Duration) { Every = e }(Every)
	Every = 20 * time.Millisecond
	reads := func(budget int64) (int, string) {
		defer func(b int64) { Budget = b }(Budget)
		Budget = budget
		v := &volume{dir: t.TempDir()}
		v.write(t, runs.FileDecisions, strings.Repeat("x", 100))
		var notes bytes.Buffer
		say := func(format string, args ...any) { fmt.Fprintf(&notes, format+"\n", args...) }
		stop := Start(context.Background(), runDir(t, "gateway"), []string{"gateway"}, v.source, say)
		time.Sleep(5*Every + Every/2)
		stop(true)
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.reads, notes.String()
	}
	if got, notes := reads(10); got != 1 || !strings.Contains(notes, "live copy of the gateway logs stopped") {
		t.Errorf("with a budget of 10 bytes the logs were read %d times (want once), notes %q", got, notes)
	}
	if got, _ := reads(1 << 20); got < 3 {
		t.Errorf("within the budget the logs were read %d times in 5.5 ticks and a last copy, want one per tick", got)
	}
}
