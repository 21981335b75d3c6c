//go:build linux

package holder

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// stdoutCap is the lifecycle's cap on the workload's captured output,
// which this reader once used.
const stdoutCap = 16 << 20

// entry is one tar entry a test writes by hand.
type entry struct {
	name, body, link string
	typ              byte
}

func tarOf(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}

func openRoot(t *testing.T) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return dir, r
}

// TestUntarOutput: the host takes from a pod's tar only the names it
// asked for, as regular files within the cap, each once, written as new
// files; anything else (an unexpected or path name, a link, a hard link,
// a device, a FIFO, a directory, an oversized entry, a duplicate) stops
// the read with an error naming it, and nothing of it is written.
func TestUntarOutput(t *testing.T) {
	names := []string{"harden-report.json", "egress-decisions.jsonl"}
	ok := entry{name: "harden-report.json", body: "{}"}
	for _, tt := range []struct {
		name    string
		entries []entry
		wantErr string
	}{
		{"expected", []entry{ok, {name: "egress-decisions.jsonl", body: "a\nb\n"}}, ""},
		{"empty", nil, ""},
		{"unexpected name", []entry{ok, {name: "evil.sh", body: "x"}}, `"evil.sh", which was not asked for`},
		{"path name", []entry{{name: "../harden-report.json", body: "x"}}, "which was not asked for"},
		{"absolute name", []entry{{name: "/etc/harden-report.json", body: "x"}}, "which was not asked for"},
		{"symlink", []entry{{name: "egress-decisions.jsonl", typ: tar.TypeSymlink, link: "/etc/shadow"}}, "not a regular file"},
		{"hard link", []entry{{name: "egress-decisions.jsonl", typ: tar.TypeLink, link: "harden-report.json"}}, "not a regular file"},
		{"device", []entry{{name: "egress-decisions.jsonl", typ: tar.TypeChar}}, "not a regular file"},
		{"fifo", []entry{{name: "egress-decisions.jsonl", typ: tar.TypeFifo}}, "not a regular file"},
		{"directory", []entry{{name: "egress-decisions.jsonl", typ: tar.TypeDir}}, "not a regular file"},
		{"oversized", []entry{{name: "egress-decisions.jsonl", body: strings.Repeat("x", 65)}}, "65 bytes, over the 64-byte cap"},
		{"twice", []entry{ok, ok}, "harden-report.json twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, root := openRoot(t)
			err := Untar(tarOf(t, tt.entries...), root, names, 64)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Untar = %v, want %q", err, tt.wantErr)
			}
			files, _ := os.ReadDir(dir)
			for _, f := range files {
				if !f.Type().IsRegular() {
					t.Errorf("%s written as %s", f.Name(), f.Type())
				}
			}
			want := len(tt.entries) // a refused entry is the last: the ones before it are written
			if tt.wantErr != "" {
				want--
			}
			if len(files) != want {
				t.Errorf("%d files written, want %d", len(files), want)
			}
		})
	}
}

// TestUntarOutputNoOverwrite: a file already in the run directory (or a
// link planted there) is never written through.
func TestUntarOutputNoOverwrite(t *testing.T) {
	dir, root := openRoot(t)
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "harden-report.json")); err != nil {
		t.Fatal(err)
	}
	err := Untar(tarOf(t, entry{name: "harden-report.json", body: "overwritten"}), root, []string{"harden-report.json"}, 64)
	if err == nil {
		t.Fatal("wrote through a planted link")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("target now %q", b)
	}
}

// TestOutputContract: what the pod's reader writes (WriteOutput,
// the producer) is what the host's reader accepts (Untar, the
// consumer): the regular files come across byte for byte, the refused
// names are said, not sent.
func TestOutputContract(t *testing.T) {
	src := t.TempDir()
	audit := "{\"method\":\"tools/call\"}\n{\"interrupted\":true}\n"
	if err := os.WriteFile(filepath.Join(src, "mcp-sidecar-tool-calls.jsonl"), []byte(audit), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "harden-report.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	names := OutputNames("sidecar")
	var tarb, problems bytes.Buffer
	if err := WriteOutput(&tarb, src, names, stdoutCap, &problems); err != nil {
		t.Fatal(err)
	}
	dir, root := openRoot(t)
	if err := Untar(&tarb, root, names, stdoutCap); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mcp-sidecar-tool-calls.jsonl")); err != nil || string(b) != audit {
		t.Errorf("audit %q (%v), want %q", b, err, audit)
	}
	if _, err := os.Stat(filepath.Join(dir, "harden-report.json")); err == nil {
		t.Error("the FIFO came across")
	}
	if !strings.HasPrefix(problems.String(), ReadProblem+"harden-report.json: not a regular file") {
		t.Errorf("problems %q", problems.String())
	}
}

// TestOutputCapAsDocker: a decision log past the stdout cap (16 MiB) but
// within the Docker backend's copy cap comes across whole (red-team
// finding: a padded log over 16 MiB was dropped on this backend).
func TestOutputCapAsDocker(t *testing.T) {
	src := t.TempDir()
	line := strings.Repeat("d", 1023) + "\n"
	log := strings.Repeat(line, (stdoutCap>>10)+1024) // 17 MiB
	if err := os.WriteFile(filepath.Join(src, runs.FileDecisions), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	names := OutputNames("gateway")
	var tarb, problems bytes.Buffer
	if err := WriteOutput(&tarb, src, names, OutputCap, &problems); err != nil {
		t.Fatal(err)
	}
	dir, root := openRoot(t)
	if err := Untar(&tarb, root, names, OutputCap); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, runs.FileDecisions)); err != nil || len(b) != len(log) {
		t.Errorf("decision log of %d bytes came across as %d (%v); problems %q", len(log), len(b), err, problems.String())
	}
}
