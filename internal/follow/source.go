// Package follow reads a run's record while the run goes: the JSONL logs
// the roles append to (the gateway's decisions, the sidecar's audit, the
// agent's turns), turned into timeline events as lines are completed. It
// serves `mcpsidecar runs tail` and the OpenTelemetry export during a run
// (internal/otelexport's Live).
//
// It reads a record through [Source], "a record that only grows": today a
// regular file in the role's output directory, which the host sees while
// the run goes (a bind mount); a backend whose output lives in engine
// volumes, read through the engine's API, plugs in its own Source.
//
// Every byte it reads was written inside the sandbox, by a workload that
// may be hostile: files are opened without following links and only when
// regular, at most a bounded amount is read per record and per poll, a
// line longer than the timeline's bound is skipped, and a torn or invalid
// line is reported as a problem and skipped, never fatal. It prints
// nothing and sends nothing: callers decide what to show.
package follow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Source is one record that only grows while a run goes.
type Source interface {
	// Name is the record's artifact name, for problems.
	Name() string
	// Read returns up to max bytes appended since the previous Read.
	// restarted says the record was replaced or truncated: data is then
	// from its start again. A record that does not exist yet is no data
	// and no error.
	Read(max int64) (data []byte, restarted bool, err error)
}

// MaxRecordBytes bounds what is read of one record, as the timeline
// reads at most (a workload grows its own files).
const MaxRecordBytes = 64 << 20

// ErrTooLarge is the error of a record past [MaxRecordBytes]: it is not
// read further.
var ErrTooLarge = fmt.Errorf("larger than %d bytes: not followed further", MaxRecordBytes)

// ErrNotRegular is the error of a record that is not a regular file (a
// FIFO, a device, a directory): it is not read.
var ErrNotRegular = errors.New("not followed")

// File is a [Source] over a regular file on this host.
type File struct {
	Path, name string
	off        int64
	ino        uint64
}

// NewFile follows the file at path, named name in problems.
func NewFile(path, name string) *File { return &File{Path: path, name: name} }

// Name implements [Source].
func (f *File) Name() string { return f.name }

// Read implements [Source]. A link is not followed and a file that is not
// regular is an error; a new inode or a shorter file is a restart.
func (f *File) Read(max int64) ([]byte, bool, error) {
	h, err := os.OpenFile(f.Path, os.O_RDONLY|runs.NoFollow|runs.NonBlock, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("opening: %s", strings.ReplaceAll(err.Error(), f.Path, f.name))
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("inspecting: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("not a regular file (%s): %w", fi.Mode().Type(), ErrNotRegular)
	}
	ino := runs.Inode(fi)
	restarted := (f.ino != 0 && ino != f.ino) || fi.Size() < f.off
	if restarted {
		f.off = 0
	}
	f.ino = ino
	if f.off >= MaxRecordBytes {
		return nil, restarted, ErrTooLarge
	}
	want := min(fi.Size()-f.off, max, MaxRecordBytes-f.off)
	if want <= 0 {
		return nil, restarted, nil
	}
	buf := make([]byte, want)
	n, err := h.ReadAt(buf, f.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, restarted, fmt.Errorf("reading: %w", err)
	}
	f.off += int64(n)
	return buf[:n], restarted, nil
}

// readSmall reads a whole small file the harness wrote, without following
// a link, at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	f := NewFile(path, filepath.Base(path))
	data, _, err := f.Read(limit + 1)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", filepath.Base(path), limit)
	}
	return data, nil
}
