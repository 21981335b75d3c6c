//go:build unix

package runs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWriteNeverFollowsOrReplaces(t *testing.T) {
	d := newRun(t)
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(d.Path, "answer.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, "stdout.txt"), []byte("planted"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"answer.txt", "stdout.txt", "../escape.txt"} {
		t.Run(name, func(t *testing.T) {
			if err := d.Write(name, []byte("host")); err == nil {
				t.Errorf("Write(%s) succeeded, want refusal", name)
			}
		})
	}
	if b, _ := os.ReadFile(outside); string(b) != "original" {
		t.Errorf("file outside the run changed to %q", b)
	}
}

func TestReplaceDoesNotFollowLink(t *testing.T) {
	d := newRun(t)
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(d.Path, MetadataFile)); err != nil {
		t.Fatal(err)
	}
	if err := d.Replace(MetadataFile, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "original" {
		t.Errorf("file outside the run changed to %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(d.Path, MetadataFile)); string(b) != "{}" {
		t.Errorf("got %q, want {}", b)
	}
}

func TestCopyOut(t *testing.T) {
	d := newRun(t)
	out, err := d.MkdirOutput("agent", os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(out, "answer.txt"), []byte("42\n"), 0o644))
	must(t, os.Symlink(secret, filepath.Join(out, "link.txt")))
	must(t, os.Symlink("/", filepath.Join(out, "rootdir")))
	must(t, syscall.Mkfifo(filepath.Join(out, "fifo"), 0o644))
	must(t, os.Mkdir(filepath.Join(out, "dir"), 0o755))

	tests := []struct {
		src, dst string
		wantErr  string
	}{
		{"answer.txt", "answer.txt", ""},
		{"link.txt", "link.txt", "opening agent/link.txt"},
		{"rootdir/etc/passwd", "passwd", "opening agent/rootdir/etc/passwd"},
		{"fifo", "fifo", "not a regular file"},
		{"dir", "dir", "not a regular file"},
		{"../run-metadata.json", "x", "opening agent/../run-metadata.json"},
		{"missing", "missing", "opening agent/missing"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			err := d.CopyOut("agent", tt.src, tt.dst)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				b, _ := os.ReadFile(filepath.Join(d.Path, tt.dst))
				if string(b) != "42\n" {
					t.Errorf("copied %q, want %q", b, "42\n")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
			}
			if _, err := os.Lstat(filepath.Join(d.Path, tt.dst)); err == nil {
				t.Errorf("%s was created in the run directory", tt.dst)
			}
		})
	}
}

// What a hostile workload leaves in its output directory is made safe:
// no setuid or setgid bit, nothing world- or group-writable, owned by the
// user who ran the harness, devices removed, links not followed.
func TestSecure(t *testing.T) {
	d, err := Create(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out := filepath.Join(d.Path, "agent")
	mustDo(t, os.Mkdir(out, 0o700))
	mustDo(t, os.WriteFile(filepath.Join(out, "suid"), []byte("x"), 0o755))
	mustDo(t, os.Chmod(filepath.Join(out, "suid"), 0o6755|fs.ModeSetuid|fs.ModeSetgid))
	mustDo(t, os.Mkdir(filepath.Join(out, "open"), 0o777))
	mustDo(t, os.Chmod(filepath.Join(out, "open"), 0o777|fs.ModeSticky))
	mustDo(t, os.WriteFile(filepath.Join(out, "open", "inner"), []byte("x"), 0o666))
	mustDo(t, os.Chmod(filepath.Join(out, "open", "inner"), 0o666))
	outside := filepath.Join(t.TempDir(), "victim")
	mustDo(t, os.WriteFile(outside, []byte("x"), 0o600))
	mustDo(t, os.Symlink(outside, filepath.Join(out, "link")))
	mustDo(t, syscall.Mkfifo(filepath.Join(out, "fifo"), 0o666))
	owner := os.Getuid()
	if owner == 0 { // as root, the test can also prove the files are re-owned
		mustDo(t, filepath.Walk(out, func(p string, _ fs.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 65532, 65532)
		}))
	}
	mustDo(t, os.WriteFile(filepath.Join(out, "name\x1b]0;PWNED\x07\nrm -rf ~"), []byte("x"), 0o644))
	changed, err := d.Secure([]string{"agent", "sidecar"}, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatalf("Secure: %v", err)
	}
	if len(changed) != 3 {
		t.Errorf("changed %q, want the link, the FIFO and the renamed name", changed)
	}
	for _, gone := range []string{"link", "fifo", "name\x1b]0;PWNED\x07\nrm -rf ~"} {
		if _, err := os.Lstat(filepath.Join(out, gone)); err == nil {
			t.Errorf("%q is still there", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(out, `name\x1b]0;PWNED\x07\nrm -rf ~`)); err != nil {
		t.Errorf("the renamed file: %v", err)
	}
	mustDo(t, filepath.Walk(out, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		m := info.Mode()
		if m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || (m&fs.ModeSymlink == 0 && m.Perm()&0o022 != 0) {
			t.Errorf("%s left with mode %v", p, m)
		}
		if uid := int(info.Sys().(*syscall.Stat_t).Uid); uid != owner {
			t.Errorf("%s owned by %d, want %d", p, uid, owner)
		}
		return nil
	}))
	if st, err := os.Stat(outside); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the link's target was changed: %v %v", st.Mode(), err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm()&0o700 != 0o700 {
		t.Errorf("the role folder is not usable by its owner: %v", err)
	}
}

// TestReplaceOutputNeverFollows: replacing a role's file puts new data at
// the name; a link planted there is replaced, its target untouched, and
// no temporary file is left.
func TestReplaceOutputNeverFollows(t *testing.T) {
	d := newRun(t)
	if _, err := d.MkdirOutput("gateway", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(d.Path, "gateway", "linked.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, "gateway", "plain.jsonl"), []byte("raw secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"linked.jsonl", "plain.jsonl"} {
		if err := d.ReplaceOutput("gateway", name, []byte("redacted")); err != nil {
			t.Fatalf("ReplaceOutput %s: %v", name, err)
		}
		st, err := os.Lstat(filepath.Join(d.Path, "gateway", name))
		if err != nil || !st.Mode().IsRegular() {
			t.Fatalf("%s after ReplaceOutput: %v, %v; want a regular file", name, st, err)
		}
		if got, _ := os.ReadFile(filepath.Join(d.Path, "gateway", name)); string(got) != "redacted" {
			t.Errorf("%s = %q, want the new data", name, got)
		}
	}
	if got, _ := os.ReadFile(victim); string(got) != "host file" {
		t.Errorf("the link's target was written: %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(d.Path, "gateway"))
	if len(entries) != 2 {
		t.Errorf("gateway/ holds %v, want the two files only", entries)
	}
	if err := d.ReplaceOutput("nope", "x", nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a missing role folder: %v, want an error naming it", err)
	}
}
