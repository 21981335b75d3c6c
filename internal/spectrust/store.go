// Package spectrust is the user's record of the sandbox specs they have
// trusted: for each, the spec file's absolute path, the SHA-256 of the
// exact content trusted, when, and the softenings it had then (so a
// changed file can be shown what it adds). The record is one JSON file in
// the user's configuration directory ([DefaultDir]: os.UserConfigDir()
// joined with "mcpsidecar"), so it is per user on Linux, macOS and Windows.
//
// The threat it answers is a spec the user did not write (a sandbox_spec.toml
// in a cloned repository) softening their sandbox: internal/cli refuses
// such a spec unless this record holds its path and hash. A record that
// someone else can write would let them trust a spec for the user, so the
// store refuses a symbolic link in place of its directory or file and, on
// Unix, a directory or file writable by group or others or owned by
// another user (root excepted).
//
// It decides nothing about what a spec softens (internal/spec does), and
// reads no flag or environment variable: internal/cli gives it its
// directory.
package spectrust

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Schema names the shape of the store's file.
const Schema = "mcpsidecar.trusted-specs/v1"

// FileName is the store's file in its directory.
const FileName = "trusted-specs.json"

// maxStoreBytes bounds what is read: an entry is a few hundred bytes.
const maxStoreBytes = 16 << 20

// Entry is one trusted spec file.
type Entry struct {
	// Path is the spec file's absolute path.
	Path string `json:"path"`
	// SHA256 is the hex SHA-256 of the content trusted (see [Hash]).
	SHA256 string `json:"sha256"`
	// Trusted is when the user trusted it.
	Trusted time.Time `json:"trusted"`
	// Softenings are what the content opened beyond the built-in spec
	// (spec.BeyondDefault) when it was trusted.
	Softenings []spec.Softening `json:"softenings"`
}

// file is the store's file as written.
type file struct {
	Schema string  `json:"schema"`
	Specs  []Entry `json:"specs"`
}

// Store is the trust record in one directory.
type Store struct {
	// Dir holds [FileName]; created (0700) on the first trust.
	Dir string
}

// DefaultDir is the user's store directory: os.UserConfigDir()
// (XDG_CONFIG_HOME or ~/.config on Linux, ~/Library/Application Support
// on macOS, %AppData% on Windows) joined with "mcpsidecar".
func DefaultDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the user's configuration directory: %w", err)
	}
	return filepath.Join(d, "mcpsidecar"), nil
}

// Hash is the hex SHA-256 of a spec file's content, as the store and
// MCPSIDECAR_TRUST_SPEC name it.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Path is the store's file.
func (s Store) Path() string { return filepath.Join(s.Dir, FileName) }

// List returns every entry, by path; none when the store does not exist.
func (s Store) List() ([]Entry, error) {
	if err := s.checkDir(false); err != nil {
		return nil, err
	}
	data, err := s.read()
	if err != nil || data == nil {
		return []Entry{}, err
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("reading trust store %s: %w", s.Path(), err)
	}
	if f.Schema != Schema {
		return nil, fmt.Errorf("reading trust store %s: schema %q, want %q", s.Path(), f.Schema, Schema)
	}
	slices.SortFunc(f.Specs, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return slices.DeleteFunc(f.Specs, func(e Entry) bool { return e.Path == "" }), nil
}

// Lookup returns the entry for the absolute path, if any.
func (s Store) Lookup(path string) (Entry, bool, error) {
	all, err := s.List()
	if err != nil {
		return Entry{}, false, err
	}
	i := slices.IndexFunc(all, func(e Entry) bool { return e.Path == path })
	if i < 0 {
		return Entry{}, false, nil
	}
	return all[i], true, nil
}

// Trust records e, replacing any entry for the same path: the store
// trusts one content per file, the last one the user trusted.
func (s Store) Trust(e Entry) error {
	if !filepath.IsAbs(e.Path) {
		return fmt.Errorf("trusting %s: not an absolute path", e.Path)
	}
	all, err := s.List()
	if err != nil {
		return err
	}
	all = slices.DeleteFunc(all, func(o Entry) bool { return o.Path == e.Path })
	return s.write(append(all, e))
}

// Untrust removes the entry for the absolute path and reports whether
// there was one.
func (s Store) Untrust(path string) (bool, error) {
	all, err := s.List()
	if err != nil {
		return false, err
	}
	n := len(all)
	all = slices.DeleteFunc(all, func(o Entry) bool { return o.Path == path })
	if len(all) == n {
		return false, nil
	}
	return true, s.write(all)
}

// read returns the store file's bytes, or nil when it does not exist. The
// file must be a regular file, not a link, and safe (checkFile); it is
// checked on the descriptor read, so a swap between look and open is
// caught.
func (s Store) read() ([]byte, error) {
	p := s.Path()
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking trust store %s: %w", p, err)
	}
	if err := unsafeKind(p, fi, "a regular file"); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("opening trust store %s: %w", p, err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checking trust store %s: %w", p, err)
	}
	if !os.SameFile(fi, opened) {
		return nil, fmt.Errorf("refusing trust store %s: it was replaced while being opened", p)
	}
	if err := checkPerm(p, opened); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStoreBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading trust store %s: %w", p, err)
	}
	if len(data) > maxStoreBytes {
		return nil, fmt.Errorf("trust store %s: larger than %d bytes", p, maxStoreBytes)
	}
	return data, nil
}

// write replaces the store file with entries: a new file (0600) in the
// same directory, synced, then renamed over the old one, so a reader
// sees the old store or the new one, never half of one.
func (s Store) write(entries []Entry) error {
	if err := s.checkDir(true); err != nil {
		return err
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	b, err := json.MarshalIndent(file{Schema: Schema, Specs: append([]Entry{}, entries...)}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding trust store: %w", err)
	}
	tmp, err := os.CreateTemp(s.Dir, ".trusted-specs-*.json")
	if err != nil {
		return fmt.Errorf("writing trust store: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing to remove
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing trust store %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing trust store %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing trust store %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), s.Path()); err != nil {
		return fmt.Errorf("replacing trust store %s: %w", s.Path(), err)
	}
	return nil
}

// checkDir refuses a store directory that is a link, not a directory, or
// unsafe (checkPerm). With create, a missing directory is made (0700,
// parents too); without it, a missing one is an empty store.
func (s Store) checkDir(create bool) error {
	if s.Dir == "" {
		return errors.New("trust store: no directory")
	}
	if create {
		if err := os.MkdirAll(s.Dir, 0o700); err != nil {
			return fmt.Errorf("creating trust store directory: %w", err)
		}
	}
	fi, err := os.Lstat(s.Dir)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking trust store directory %s: %w", s.Dir, err)
	}
	if err := unsafeKind(s.Dir, fi, "a directory"); err != nil {
		return err
	}
	return checkPerm(s.Dir, fi)
}

// unsafeKind refuses a link, or anything but a directory (want "a
// directory") or a regular file.
func unsafeKind(path string, fi fs.FileInfo, want string) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("refusing trust store %s: it is a symbolic link (the store must be your own %s: remove the link)", path, strings.TrimPrefix(want, "a "))
	case want == "a directory" && !fi.IsDir(), want != "a directory" && !fi.Mode().IsRegular():
		return fmt.Errorf("refusing trust store %s: it is not %s", path, want)
	}
	return nil
}
