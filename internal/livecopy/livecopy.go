// Package livecopy keeps each role's logs (runs.RoleFiles) in the run
// directory current while the run goes, where a backend's roles write them
// somewhere the host cannot read directly: a volume of the engine (the
// Docker backend's engine-only path) or a pod's volume (the Kubernetes
// backend). Every second it reads the files through the backend's holder
// (a tar stream, internal/holder) and grows each copy by what it gained,
// so what reads the run directory while the run goes (run's progress
// lines, runs tail, the OpenTelemetry live export and relay) sees the
// record as it grows, as with host directories.
//
// The copies are not the record: when the run ends the backend reads each
// file again over them ([WriteGrow]) and removes a copy the final read did
// not write ([RemoveStale]).
package livecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Every is how often the roles' logs are copied.
var Every = time.Second

// Budget bounds what the live copy reads of one role in a run: each tick
// reads the role's logs whole, so a role whose logs are large and
// rewritten (red team: four 60 MiB logs changed every 300 ms made the
// harness write 2 GB in 20 s) would have the host copy without end. Past
// it the role's live copy stops; the final read is whole and exact
// whatever the budget.
var Budget int64 = 512 << 20

// readTimeout bounds one role's read.
const readTimeout = 10 * time.Second

// Source writes the files names of role, as the holder's tar stream
// (holder.WriteOutput), to w.
type Source func(ctx context.Context, role string, names []string, w io.Writer) error

// Start copies, every [Every] until stopped, the logs of each of roles
// from src into its folder of the run directory dir; say prints a note.
// stop ends it; with last, it copies once more first.
func Start(ctx context.Context, dir string, roles []string, src Source, say func(string, ...any)) (stop func(last bool)) {
	// A copy in flight is never cut off: stop waits for it (each is
	// bounded by readTimeout). Cancelling its exec midway leaves the
	// stream's peer writing into a closed connection, which client-go
	// reports on stderr (Kubernetes).
	ctx = context.WithoutCancel(ctx)
	quit, done := make(chan struct{}), make(chan struct{})
	copied := map[string]int64{} // bytes read, per role
	each := func() {
		for _, role := range roles {
			if len(runs.RoleFiles[role]) == 0 || copied[role] > Budget {
				continue
			}
			n, _ := copyRole(ctx, dir, role, src)
			if copied[role] += n; copied[role] > Budget {
				say("note: the live copy of the %s logs stopped after %d MiB (they churn); the record is read whole at the end", role, copied[role]>>20)
			}
		}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(Every)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			each()
		}
	}()
	return func(last bool) {
		close(quit)
		<-done
		if last {
			each()
		}
	}
}

// copyRole copies one role's logs and says how many bytes it read; a
// failure is left to the next tick and to the final read.
func copyRole(ctx context.Context, dir, role string, src Source) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	dst, err := os.OpenRoot(filepath.Join(dir, role))
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	names := runs.RoleFiles[role]
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := src(ctx, role, names, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	cr := &countingReader{r: pr}
	_, err = holder.UntarWith(cr, dst, names, holder.OutputCap, WriteGrow)
	pr.CloseWithError(errors.New("stopped reading"))
	return cr.n, errors.Join(<-done, err)
}

// WriteGrow makes name in dst exactly the size bytes of r, in place: when
// the file already holds a prefix of them (the copy made a second ago of
// a log that only grows) only the rest is appended; otherwise it is
// rewritten from the start. The file stays the same file, so readers
// that follow it by offset and inode (run's progress lines, runs tail)
// see it grow. It is for folders the harness alone writes: no container
// writes there.
func WriteGrow(dst *os.Root, name string, r io.Reader, size int64) error {
	f, err := dst.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	have := min(fi.Size(), size)
	head := make([]byte, have)
	if _, err := io.ReadFull(r, head); err != nil {
		return err
	}
	old := make([]byte, have)
	if _, err := f.ReadAt(old, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if fi.Size() > size || !bytes.Equal(old, head) {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.WriteAt(head, 0); err != nil {
			return err
		}
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return err
	}
	_, err = io.CopyN(f, r, size-have)
	return err
}

// RemoveStale removes each live copy of names the final read did not
// write (written): a file the role deleted, or made a link or a FIFO, at
// the end, or one the read stopped before. The record holds what the
// volume held at the end, or nothing; never an earlier copy (red team: a
// workload deleted its answer after the live copy was made, and the stale
// copy passed the verdict). It returns what it removed, as problems.
func RemoveStale(dst *os.Root, names, written []string) []string {
	var problems []string
	for _, name := range names {
		if slices.Contains(written, name) {
			continue
		}
		if _, err := dst.Lstat(name); err != nil {
			continue // never copied
		}
		if err := dst.Remove(name); err != nil {
			problems = append(problems, fmt.Sprintf("%s: not read at the end, and its live copy could not be removed: %v", name, err))
			continue
		}
		problems = append(problems, name+": not read from the volume at the end; the live copy made during the run is removed")
	}
	return problems
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
