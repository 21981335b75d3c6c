package spec

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// DefaultSource is the Source of the embedded default spec.
const DefaultSource = "<default sandbox_spec.toml>"

// maxSpecBytes bounds what is read: a spec is a few hundred bytes.
const maxSpecBytes = 1 << 20

//go:embed default_spec.toml
var defaultSpec []byte

// DefaultTOML is the embedded default spec (the seed's McpSidecar spec).
func DefaultTOML() []byte { return bytes.Clone(defaultSpec) }

// Default loads the embedded default spec.
func Default() (*Spec, error) { return Load(DefaultSource, defaultSpec) }

// LoadFile reads and validates the spec at path. A missing or unreadable
// file is reported as a [Problems] error like any other invalid spec.
func LoadFile(path string) (*Spec, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(path, data)
}

// ReadFile reads the spec text at path (at most one byte more than [Load]
// accepts), reporting a missing or unreadable file as a [Problems] error.
// A caller that must use exactly the bytes it checked (a trust decision
// over the file's hash) reads once with it and passes the bytes to [Load].
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		msg := "cannot read spec: " + err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg = "spec file does not exist"
		}
		return nil, &Problems{List: []Problem{{File: path, Message: msg}}}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSpecBytes+1))
	if err != nil {
		return nil, &Problems{List: []Problem{{File: path, Message: "cannot read spec: " + err.Error()}}}
	}
	return data, nil
}

// Load validates the spec text data, naming it file in problems. It
// returns every problem at once as a [*Problems].
func Load(file string, data []byte) (*Spec, error) {
	if p := checkBytes(file, data); p != nil {
		return nil, &Problems{List: []Problem{*p}}
	}
	// go-toml's decoder finds syntax errors and duplicate keys with their
	// position. It stops at the first type error and matches struct
	// fields case-insensitively, so the rules themselves are checked by
	// walking the syntax tree below, which keeps every position.
	var m map[string]any
	if err := toml.Unmarshal(data, &m); err != nil {
		return nil, &Problems{List: []Problem{decodeProblem(file, err)}}
	}
	w := &walker{file: file, spec: &Spec{Source: file, SchemaVersion: 1}}
	w.walk(data)
	w.checkRules()
	if err := w.problems.errOrNil(); err != nil {
		return nil, err
	}
	return w.spec, nil
}

func checkBytes(file string, data []byte) *Problem {
	if len(data) > maxSpecBytes {
		return &Problem{File: file, Message: fmt.Sprintf("spec is larger than %d bytes", maxSpecBytes)}
	}
	if utf8.Valid(data) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, size := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	line, col := lineCol(data, off)
	return &Problem{File: file, Line: line, Col: col, Message: "file is not valid UTF-8 (TOML must be UTF-8)"}
}

// lineCol turns a byte offset into 1-based line and column (in bytes).
func lineCol(data []byte, off int) (int, int) {
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := off - bytes.LastIndexByte(before, '\n')
	return line, col
}

func decodeProblem(file string, err error) Problem {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		key := ""
		if k := de.Key(); len(k) > 0 {
			key = joinKey(k)
		}
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		return Problem{File: file, Line: line, Col: col, Key: key, Message: "TOML syntax: " + msg}
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		return Problem{File: file, Message: "TOML: " + pe.Error()}
	}
	return Problem{File: file, Message: "TOML: " + err.Error()}
}
