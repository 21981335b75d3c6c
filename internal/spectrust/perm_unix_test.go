//go:build unix

package spectrust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreRefusesUnsafe: a link in place of the store's file or
// directory, and a file or directory others can write, are refused with
// an error naming the path and why, both on reading and on trusting.
func TestStoreRefusesUnsafe(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, s Store)
		want  string
	}{
		{"file is a link", func(t *testing.T, s Store) {
			real := filepath.Join(t.TempDir(), "other.json")
			writeStore(t, real, 0o600)
			mkdir(t, s.Dir, 0o700)
			if err := os.Symlink(real, s.Path()); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"directory is a link", func(t *testing.T, s Store) {
			real := t.TempDir()
			writeStore(t, filepath.Join(real, FileName), 0o600)
			mkdir(t, filepath.Dir(s.Dir), 0o700)
			if err := os.Symlink(real, s.Dir); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"world-writable file", func(t *testing.T, s Store) {
			mkdir(t, s.Dir, 0o700)
			writeStore(t, s.Path(), 0o666)
		}, "writable by group or others (mode 0666)"},
		{"group-writable file", func(t *testing.T, s Store) {
			mkdir(t, s.Dir, 0o700)
			writeStore(t, s.Path(), 0o620)
		}, "writable by group or others (mode 0620)"},
		{"world-writable directory", func(t *testing.T, s Store) {
			mkdir(t, s.Dir, 0o777)
			writeStore(t, s.Path(), 0o600)
		}, "writable by group or others (mode 0777)"},
		{"file is a directory", func(t *testing.T, s Store) {
			mkdir(t, s.Path(), 0o700)
		}, "is not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			tt.setup(t, s)
			if _, err := s.List(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("List: %v, want an error containing %q", err, tt.want)
			}
			if err := s.Trust(Entry{Path: "/x/sandbox_spec.toml", SHA256: "a"}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Trust: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestStoreFileMode: the store's file and directory are the user's alone.
func TestStoreFileMode(t *testing.T) {
	s := newStore(t)
	if err := s.Trust(Entry{Path: "/x/sandbox_spec.toml", SHA256: "a"}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{s.Dir: 0o700, s.Path(): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // MkdirAll's mode passes through the umask
		t.Fatal(err)
	}
}

func writeStore(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(`{"schema": "`+Schema+`", "specs": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestPermProblem: the store is the user's alone: another user's file is
// refused even when its mode is tight; root's is accepted (root can write
// it anyway).
func TestPermProblem(t *testing.T) {
	tests := []struct {
		mode      os.FileMode
		owner, me int
		want      string
	}{
		{0o600, 1000, 1000, ""},
		{0o700, 0, 1000, ""},
		{0o644, 1000, 1000, ""},
		{0o600, 1001, 1000, "owned by uid 1001, not by you (uid 1000)"},
		{0o660, 1000, 1000, "writable by group or others (mode 0660)"},
		{0o602, 1000, 1000, "writable by group or others (mode 0602)"},
	}
	for _, tt := range tests {
		if got := permProblem(tt.mode, tt.owner, tt.me); !strings.Contains(got, tt.want) || (tt.want == "") != (got == "") {
			t.Errorf("permProblem(%04o, %d, %d) = %q, want %q", tt.mode, tt.owner, tt.me, got, tt.want)
		}
	}
}
