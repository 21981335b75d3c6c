package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// readOutput reads the files collect needs of a role (runs.RoleFiles
// and the harden report) from its pod's output volume, through the API
// (the holder's read command, kube.Client.ReadOutput), into the role's
// output directory of the run directory. It returns what the pod said
// about the files (a link or a FIFO left out, a file over the cap).
func (b *kubeBackend) readOutput(ctx context.Context, j *job, c *orchestrate.Container) ([]string, error) {
	role := c.Step.Role
	dir, ok := podOutputDir(c.Step)
	if !ok {
		return nil, nil // a role without an output directory has no holder
	}
	dst, err := os.OpenRoot(filepath.Join(j.dir.Path, role))
	if err != nil {
		return nil, fmt.Errorf("%s output directory: %w", role, err)
	}
	defer dst.Close()
	names := outputNames(role)
	pr, pw := io.Pipe()
	type result struct {
		problems, notes []string
		err             error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.problems, r.notes, r.err = b.k.Client.ReadOutput(ctx, b.ns, c.ID, dir, names, kubeOutputCap, pw)
		pw.CloseWithError(r.err)
		done <- r
	}()
	untarErr := untarOutput(pr, dst, names, kubeOutputCap)
	pr.CloseWithError(errors.New("stopped reading")) // the exec then ends
	r := <-done
	for _, n := range r.notes {
		fmt.Fprintf(j.s.Err, "%s output reader: %s\n", role, n)
	}
	if r.err != nil {
		return r.problems, r.err
	}
	return r.problems, untarErr
}

// kubeOutputCap bounds each file read from a pod's output volume: the
// Docker backend's copy cap, so a role's log that the Docker backend
// keeps is kept here too (a red-team workload padded the decision log
// past the 16 MiB stdout cap this reader once used, and the whole log was
// dropped).
const kubeOutputCap = runs.MaxCopyBytes

// outputNames are the files read from a role's output volume.
func outputNames(role string) []string {
	return append([]string{runs.FileHardenReport}, runs.RoleFiles[role]...)
}

// podOutputDir is the container path of the role's output directory.
func podOutputDir(st orchestrate.Step) (string, bool) {
	for _, m := range st.Spec.Mounts {
		if m.Source == st.OutputDir && !m.ReadOnly {
			return m.Target, true
		}
	}
	return "", false
}

// untarOutput writes the tar's files into dst. The tar came from a pod
// whose volume the sandboxed role could write, and from a reader running
// there: nothing in it is trusted. Only a regular-file entry whose name
// is one of names, each at most once, within limit bytes, is written,
// with a new file that does not follow a link (os.Root); any other entry
// stops the read with an error.
func untarOutput(r io.Reader, dst *os.Root, names []string, limit int64) error {
	_, err := untarInto(r, dst, names, limit, writeNew)
	return err
}

// untarInto is untarOutput with write for each accepted entry.
func untarInto(r io.Reader, dst *os.Root, names []string, limit int64, write func(*os.Root, string, io.Reader, int64) error) (written []string, err error) {
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

// writeNew creates name in dst (never over an existing file or link) with
// exactly size bytes of r.
func writeNew(dst *os.Root, name string, r io.Reader, size int64) error {
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(out, r, size)
	return errors.Join(err, out.Close())
}
