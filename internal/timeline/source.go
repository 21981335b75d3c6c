package timeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Artifact names read from a run directory (declared in internal/runs).
const (
	FileRunMetadata     = runs.MetadataFile
	FileAudit           = runs.FileAudit
	FileDecisions       = runs.FileDecisions
	FileAgentTurns      = runs.FileAgentTurns
	FileProbeReport     = runs.FileProbeReport
	FileAnswer          = runs.FileAnswer
	FileStdout          = runs.FileStdout
	FileStderr          = runs.FileStderr
	FileGatewayPol      = runs.FileGatewayPolicy
	FileResolvedProfile = runs.FileResolvedProfile
	FileTimeline        = runs.FileTimeline
	FileReport          = runs.FileReport
)

// maxSourceBytes bounds how much of one source is read: the workload can
// grow its own output files, and the host must not be made to load an
// arbitrarily large file into memory.
const maxSourceBytes = 64 << 20

// maxLineBytes bounds one JSONL line; longer lines are reported, not parsed.
const maxLineBytes = 1 << 20

// Problem is something wrong with a source: a missing file, a torn or
// invalid line. Problems are reported with the timeline, never fatal.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Message)
}

// errNotRegular marks a source that exists but is not a regular file.
var errNotRegular = errors.New("not a regular file")

// readSource reads name in dir without following a symbolic link and only
// if it is a regular file. O_NONBLOCK keeps a planted FIFO from hanging the
// host. It returns fs.ErrNotExist for a missing file and reports truncation
// when the file exceeds limit.
func readSource(dir, name string, limit int64) ([]byte, bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|runs.NoFollow|runs.NonBlock, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, false, fmt.Errorf("opening %s: is a symbolic link, not followed", name)
		}
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("inspecting %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("opening %s: %w", name, errNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}

// sourceReader reads the sources of one run directory and collects the
// problems it meets.
type sourceReader struct {
	dir      string
	problems []Problem
}

func (r *sourceReader) problem(file string, line int, format string, args ...any) {
	r.problems = append(r.problems, Problem{File: file, Line: line, Message: fmt.Sprintf(format, args...)})
}

// read returns the file's bytes, or nil after recording why it could not.
// A missing optional file is not a problem.
func (r *sourceReader) read(name string, required bool) []byte {
	data, truncated, err := readSource(r.dir, name, maxSourceBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if required {
			r.problem(name, 0, "missing")
		}
		return nil
	case err != nil:
		r.problem(name, 0, "%v", err)
		return nil
	}
	if truncated {
		r.problem(name, 0, "larger than %d bytes; only the first %d read", maxSourceBytes, maxSourceBytes)
	}
	return data
}

// readJSON decodes a whole-file JSON source into v; it reports whether the
// file was present and valid.
func (r *sourceReader) readJSON(name string, required bool, v any) bool {
	data := r.read(name, required)
	if data == nil {
		return false
	}
	if err := json.Unmarshal(data, v); err != nil {
		r.problem(name, 0, "invalid JSON: %v", err)
		return false
	}
	return true
}

// eachLine calls fn for every non-blank line of a JSONL source with its
// 1-based line number. A final line without a newline that does not parse
// is reported as torn (the writer died mid-line); other invalid lines are
// reported as invalid. fn returns the decode error for a line, if any.
func (r *sourceReader) eachLine(name string, required bool, fn func(line []byte, n int) error) int {
	data := r.read(name, required)
	count := 0
	for n := 1; len(data) > 0; n++ {
		line, rest, found := bytes.Cut(data, []byte("\n"))
		data = rest
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) > maxLineBytes {
			r.problem(name, n, "line longer than %d bytes skipped", maxLineBytes)
			continue
		}
		if err := fn(line, n); err != nil {
			if !found {
				r.problem(name, n, "torn last line (no newline, %d bytes) skipped: %v", len(line), err)
			} else {
				r.problem(name, n, "invalid line skipped: %v", err)
			}
			continue
		}
		count++
	}
	return count
}
