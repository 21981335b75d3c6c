package holder

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// The host's side of the holder's tar: it trusts nothing in it.

// OutputCap bounds each file read from an output volume: the copy cap
// of host directories (runs.MaxCopyBytes), so a role's log one backend
// keeps is kept by the others too (a red-team workload padded the decision log
// past the 16 MiB stdout cap this reader once used, and the whole log was
// dropped).
const OutputCap = runs.MaxCopyBytes

// OutputNames are the files read from a role's output volume.
func OutputNames(role string) []string {
	return append([]string{runs.FileHardenReport}, runs.RoleFiles[role]...)
}

// Untar writes the tar's files into dst. The tar came from a holder
// whose volume the sandboxed role could write, and from a reader running
// there: nothing in it is trusted. Only a regular-file entry whose name
// is one of names, each at most once, within limit bytes, is written,
// with a new file that does not follow a link (os.Root); any other entry
// stops the read with an error.
func Untar(r io.Reader, dst *os.Root, names []string, limit int64) error {
	_, err := UntarWith(r, dst, names, limit, WriteNew)
	return err
}

// UntarWith is Untar with write for each accepted entry.
func UntarWith(r io.Reader, dst *os.Root, names []string, limit int64, write func(*os.Root, string, io.Reader, int64) error) (written []string, err error) {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return written, nil
		}
		if err != nil {
			return written, fmt.Errorf("reading the output tar: %w", err)
		}
		switch {
		case !slices.Contains(names, h.Name):
			return written, fmt.Errorf("the output tar has %q, which was not asked for: read stopped", h.Name)
		case seen[h.Name]:
			return written, fmt.Errorf("the output tar has %s twice: read stopped", h.Name)
		case h.Typeflag != tar.TypeReg:
			return written, fmt.Errorf("the output tar's %s is not a regular file (type %q): read stopped", h.Name, h.Typeflag)
		case h.Size < 0 || h.Size > limit:
			return written, fmt.Errorf("the output tar's %s is %d bytes, over the %d-byte cap: read stopped", h.Name, h.Size, limit)
		}
		seen[h.Name] = true
		if err := write(dst, h.Name, tr, h.Size); err != nil {
			return written, fmt.Errorf("writing %s: %w", h.Name, err)
		}
		written = append(written, h.Name)
	}
}

// WriteNew creates name in dst (never over an existing file or link) with
// exactly size bytes of r.
func WriteNew(dst *os.Root, name string, r io.Reader, size int64) error {
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(out, r, size)
	return errors.Join(err, out.Close())
}
