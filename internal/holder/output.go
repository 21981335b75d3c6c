package holder

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// WriteOutput is [ReadCommand]'s work, in the holder: a tar of the named
// files of dir on w, each a regular file of at most limit bytes, in the
// order named. The directory was writable by the sandboxed role, so a
// name is never followed: one that is a link, a FIFO, a device or a
// directory, or is over the cap, is left out and said on problems (one
// line starting with [ReadProblem]); a missing one is left out silently
// (a role writes only some of its files). The host checks the tar again
// (it trusts no pod).
func WriteOutput(w io.Writer, dir string, names []string, limit int64, problems io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	for _, name := range names {
		if err := ValidOutputName(name); err != nil {
			return err
		}
		why, err := writeEntry(tw, root, name, limit)
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		if why != "" {
			fmt.Fprintf(problems, "%s%s: %s\n", ReadProblem, name, why)
		}
	}
	return tw.Close()
}

// ValidOutputName accepts a plain file name: no directory, no "." or "..".
func ValidOutputName(name string) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name || !filepath.IsLocal(name) {
		return fmt.Errorf("output file name %q: want a plain file name", name)
	}
	return nil
}

// writeEntry adds one file to tw, or says why not. The name is looked at
// without following it, then opened without blocking on a FIFO, and the
// open file must be the one looked at (os.Root follows a link that stays
// inside the directory, and a name swapped for a link between the look
// and the open must not pass). Its size is taken once, so a file still
// growing is read up to that size.
func writeEntry(tw *tar.Writer, root *os.Root, name string, limit int64) (problem string, err error) {
	lst, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return err.Error(), nil
	case lst.Mode()&fs.ModeSymlink != 0:
		return "a symbolic link: not read", nil
	case !lst.Mode().IsRegular():
		return fmt.Sprintf("not a regular file (%s): not read", lst.Mode().Type()), nil
	}
	f, err := root.OpenFile(name, os.O_RDONLY|runs.NoFollow|runs.NonBlock, 0)
	if err != nil {
		return err.Error(), nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error(), nil
	}
	if !st.Mode().IsRegular() || !os.SameFile(lst, st) {
		return "replaced while read: not read", nil
	}
	if st.Size() > limit {
		return fmt.Sprintf("%d bytes, over the %d-byte cap: not read", st.Size(), limit), nil
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: st.Size(), Mode: 0o600, ModTime: st.ModTime(), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return "", err
	}
	n, err := io.Copy(tw, io.LimitReader(f, st.Size()))
	if err != nil {
		return "", err
	}
	if n < st.Size() {
		// Truncated while read: the entry is padded to its announced
		// size, and the host is told.
		if _, err := io.CopyN(tw, zeros{}, st.Size()-n); err != nil {
			return "", err
		}
		return fmt.Sprintf("shrank from %d to %d bytes while read: padded with zeros", st.Size(), n), nil
	}
	return "", nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
