package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
)

// Dir is one run's directory.
type Dir struct {
	ID   string // run-<UTC timestamp>[-n], also the Docker label value
	Path string // absolute path
	root *os.Root
}

// MaxCopyBytes bounds one file copied out of a container output directory,
// so a workload cannot fill the host's disk through the harness.
const MaxCopyBytes = 64 << 20

// DefaultRunsDir holds the run directories unless --runs-dir says otherwise.
const DefaultRunsDir = ".docker_sandbox/runs"

// Create makes a new, unique run directory in runsDir, private to the
// user who runs it (0700: the record names hosts, tools and answers; a
// runs directory it creates is 0700 too). Uniqueness comes from Mkdir
// failing on an existing name, not from the clock alone.
func Create(runsDir string, now time.Time) (*Dir, error) {
	if err := os.MkdirAll(runsDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating runs directory %s: %w", runsDir, err)
	}
	abs, err := filepath.Abs(runsDir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", runsDir, err)
	}
	stamp := "run-" + now.UTC().Format("2006-01-02-15-04-05")
	for n := 1; n < 1000; n++ {
		id := stamp
		if n > 1 {
			id += "-" + strconv.Itoa(n)
		}
		p := filepath.Join(abs, id)
		err := os.Mkdir(p, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating run directory %s: %w", p, err)
		}
		return Open(p)
	}
	return nil, fmt.Errorf("creating run directory under %s: too many runs in one second", abs)
}

// Open opens an existing run directory.
func Open(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", path, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("opening run directory %s: %w", abs, err)
	}
	return &Dir{ID: filepath.Base(abs), Path: abs, root: root}, nil
}

// Close releases the directory handle.
func (d *Dir) Close() error { return d.root.Close() }

// Write creates name in the run directory with data. It never replaces an
// existing file and never follows a link (O_EXCL refuses both).
func (d *Dir) Write(name string, data []byte) error {
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("creating artifact %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing artifact %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing artifact %s: %w", name, err)
	}
	return nil
}

// WriteJSON writes v indented, with a trailing newline.
func (d *Dir) WriteJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding artifact %s: %w", name, err)
	}
	return d.Write(name, append(b, '\n'))
}

// Replace writes name, replacing a file the host wrote earlier (for
// run-metadata.json, rewritten as phases finish). The new content is written
// to a fresh temporary name and renamed over the old one inside the root, so
// a link at name is replaced, never followed.
func (d *Dir) Replace(name string, data []byte) error {
	tmp := "." + name + ".tmp"
	_ = d.root.Remove(tmp)
	if err := d.Write(tmp, data); err != nil {
		return err
	}
	if err := d.root.Rename(tmp, name); err != nil {
		return fmt.Errorf("replacing artifact %s: %w", name, err)
	}
	return nil
}

// MkdirOutput creates the output directory of one role, owned by the
// container's user so the workload (which runs as that unprivileged user)
// can write there and nowhere else in the run.
func (d *Dir) MkdirOutput(role string, uid, gid int) (string, error) {
	if err := d.root.Mkdir(role, 0o700); err != nil {
		return "", fmt.Errorf("creating output directory %s: %w", role, err)
	}
	p := filepath.Join(d.Path, role)
	if err := d.root.Chown(role, uid, gid); err != nil {
		// Without root the host cannot chown; opening the mode up is
		// the only way the container user can write its output.
		if err := d.root.Chmod(role, 0o777); err != nil {
			return "", fmt.Errorf("making output directory %s writable: %w", p, err)
		}
	}
	return p, nil
}

// CopyOut copies role/src, written by a container, to dst in the run
// directory (see [Dir.ReadOutput]).
func (d *Dir) CopyOut(role, src, dst string) error {
	data, err := d.ReadOutput(role, src)
	if err != nil {
		return err
	}
	return d.Write(dst, data)
}

// ReadOutput reads role/src, written by a container. The source must be a
// regular file reached without following a link and at most MaxCopyBytes
// long; anything else is refused with an error naming it.
func (d *Dir) ReadOutput(role, src string) ([]byte, error) {
	sub, err := d.root.OpenRoot(role)
	if err != nil {
		return nil, fmt.Errorf("opening output directory %s: %w", role, err)
	}
	defer sub.Close()
	f, err := sub.OpenFile(src, os.O_RDONLY|NoFollow|NonBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s/%s: %w", role, src, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("inspecting %s/%s: %w", role, src, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("copying %s/%s: not a regular file (%s)", role, src, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxCopyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", role, src, err)
	}
	if len(data) > MaxCopyBytes {
		return nil, fmt.Errorf("copying %s/%s: larger than %d bytes", role, src, MaxCopyBytes)
	}
	return data, nil
}

// ReplaceOutput writes data over role/name, a file a container wrote (the
// harness's redaction of it, once the container has stopped: the raw copy
// must not keep a secret the record removed). The data goes to a fresh
// temporary name in the role's folder and is renamed over name, so a link
// or a FIFO at name is replaced, never followed or opened.
func (d *Dir) ReplaceOutput(role, name string, data []byte) error {
	sub, err := d.root.OpenRoot(role)
	if err != nil {
		return fmt.Errorf("opening output directory %s: %w", role, err)
	}
	defer sub.Close()
	tmp := ".mcpsidecar-" + name + ".tmp"
	_ = sub.Remove(tmp)
	f, err := sub.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("replacing %s/%s: %w", role, name, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = sub.Rename(tmp, name)
	}
	if werr != nil {
		_ = sub.Remove(tmp)
		return fmt.Errorf("replacing %s/%s: %w", role, name, werr)
	}
	return nil
}

// Secure makes what the containers left in each role's output directory
// safe on the host, once they have stopped: every entry owned by uid:gid
// (the user who started the run), no setuid, setgid or sticky bit, nothing
// writable by group or others; links, FIFOs, sockets and devices removed
// (they are not data; nothing of the host follows them); a name with
// control characters renamed to its escaped form. Threat: a workload
// plants a setuid copy of a binary, a world-writable folder, or a name
// that rewrites a terminal, for a local user to trip over long after the
// run. What was removed or renamed is returned, to be recorded. The walk
// goes on past problems, returned joined.
func (d *Dir) Secure(roles []string, uid, gid int) ([]string, error) {
	s := securer{d: d, uid: uid, gid: gid}
	for _, role := range roles {
		s.tree(role)
	}
	return s.changed, errors.Join(s.errs...)
}

type securer struct {
	d        *Dir
	uid, gid int
	changed  []string
	errs     []error
}

func (s *securer) tree(rel string) {
	if clean := cleanName(filepath.Base(rel)); clean != filepath.Base(rel) {
		to := filepath.Join(filepath.Dir(rel), clean)
		if err := s.d.root.Rename(rel, to); err != nil {
			s.errs = append(s.errs, fmt.Errorf("renaming %q: %w", rel, err))
			return
		}
		s.changed = append(s.changed, fmt.Sprintf("%s: renamed from a name with control characters", to))
		rel = to
	}
	st, err := s.d.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("securing %s: %w", rel, err))
		return
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		if err := s.d.root.Remove(rel); err != nil {
			s.errs = append(s.errs, fmt.Errorf("removing %s: %w", rel, err))
			return
		}
		s.changed = append(s.changed, fmt.Sprintf("%s: removed (%s, not a regular file)", termtext.Clean(rel), st.Mode().Type()))
		return
	}
	s.entry(rel)
}

// cleanName escapes a file name's control characters, newline and tab
// included (a name is one line in every listing).
func cleanName(name string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(termtext.Clean(name))
}

// entry secures one regular file or directory, opened without following
// a link (one swapped in since Lstat fails to open).
func (s *securer) entry(rel string) {
	f, err := s.d.root.OpenFile(rel, os.O_RDONLY|NoFollow|NonBlock, 0)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("securing %s: %w", rel, err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("securing %s: %w", rel, err))
		return
	}
	if err := chown(f, s.uid, s.gid); err != nil && !errors.Is(err, fs.ErrPermission) {
		s.errs = append(s.errs, fmt.Errorf("owning %s: %w", rel, err))
	}
	safe := st.Mode().Perm() &^ 0o022
	if st.IsDir() {
		safe |= 0o700
	}
	if err := f.Chmod(safe); err != nil {
		s.errs = append(s.errs, fmt.Errorf("securing the mode of %s: %w", rel, err))
	}
	if !st.IsDir() {
		return
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("listing %s: %w", rel, err))
	}
	for _, n := range names {
		s.tree(filepath.Join(rel, n))
	}
}

// Output caps: what one role may leave in its output directory, a bind
// mount of the host's disk. Threat: a workload fills the host's disk or
// its inodes (the fsize limit bounds one file, not how many). The harness
// checks the usage while the run goes on and stops the role past a cap.
const (
	MaxOutputBytes   = 256 << 20
	MaxOutputEntries = 10_000
)

// Usage measures a role's output directory: bytes allocated on disk and
// entries, walking without following links and stopping once a cap is
// passed (so a huge tree costs no more than the cap to measure).
func (d *Dir) Usage(role string) (bytes int64, entries int, err error) {
	err = fs.WalkDir(d.root.FS(), role, func(p string, e fs.DirEntry, werr error) error {
		if werr != nil {
			return nil // gone or unreadable: not counted
		}
		entries++
		if info, ierr := e.Info(); ierr == nil {
			bytes += allocated(info)
		}
		if bytes > MaxOutputBytes || entries > MaxOutputEntries {
			return fs.SkipAll
		}
		return nil
	})
	return bytes, entries, err
}
