//go:build linux

package holder

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteOutput: only regular files within the cap go into the tar, in
// the order named; a link (to a file outside, or inside), a FIFO, a
// directory or an oversized file is left out with a problem line naming
// it, without blocking on the FIFO; a missing file is left out silently.
func TestWriteOutput(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	write(t, secret, "host secret")
	write(t, filepath.Join(dir, "a.jsonl"), "line a\n")
	write(t, filepath.Join(dir, "b.json"), "{}")
	write(t, filepath.Join(dir, "big.jsonl"), strings.Repeat("x", 100))
	if err := os.Symlink(secret, filepath.Join(dir, "out.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.jsonl", filepath.Join(dir, "in.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	var out, problems bytes.Buffer
	names := []string{"b.json", "a.jsonl", "missing", "out.jsonl", "in.jsonl", "fifo.jsonl", "sub", "big.jsonl"}
	if err := WriteOutput(&out, dir, names, 50, &problems); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s: type %c, want a regular file", h.Name, h.Typeflag)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
		order = append(order, h.Name)
	}
	if diff := cmp.Diff(map[string]string{"b.json": "{}", "a.jsonl": "line a\n"}, got); diff != "" {
		t.Errorf("tar mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b.json", "a.jsonl"}, order); diff != "" {
		t.Errorf("order mismatch (-want +got):\n%s", diff)
	}
	lines := strings.Split(strings.TrimSpace(problems.String()), "\n")
	want := []string{
		"out.jsonl: a symbolic link", "in.jsonl: a symbolic link", "fifo.jsonl: not a regular file",
		"sub: not a regular file", "big.jsonl: 100 bytes, over the 50-byte cap",
	}
	if len(lines) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d lines", problems.String(), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], ReadProblem+w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], ReadProblem+w)
		}
	}
}

// TestWriteOutputNames: a name that is not a plain file name is an error,
// before anything is read.
func TestWriteOutputNames(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ok"), "x")
	for _, name := range []string{"", ".", "..", "../ok", "sub/ok", "/etc/passwd"} {
		var out, problems bytes.Buffer
		if err := WriteOutput(&out, dir, []string{name}, 10, &problems); err == nil || !strings.Contains(err.Error(), "plain file name") {
			t.Errorf("WriteOutput(%q) = %v, want a name error", name, err)
		}
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
