// Package mcppin pins the tool definitions of declared MCP servers: a lock
// file beside the spec records, for each server, each exposed tool's name,
// description and input schema with a hash of the three, and [Compare]
// tells a changed, added or removed tool from the pinned one. The threat
// is the "rug pull": a server that changes what a tool says it does (its
// description is read by the model as an instruction) or what it takes,
// after the user chose to trust it.
//
// It is pure data and I/O on the lock file only: it must not talk to an
// MCP server (callers list the tools and hand them in) or import the MCP
// SDK, so the sidecar and the CLI share one definition of a pin.
package mcppin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Schema is the value of [Lock.Schema].
const Schema = "mcpsidecar.mcp-lock/v1"

// LockSuffix replaces the spec file's extension to name its lock file:
// sandbox_spec.toml is pinned in sandbox_spec.mcp-lock.json.
const LockSuffix = ".mcp-lock.json"

// maxLockBytes bounds what is read: 50 tools with large schemas fit.
const maxLockBytes = 8 << 20

// Lock is the lock file: one entry per server, sorted by name.
type Lock struct {
	Schema  string   `json:"schema"`
	Servers []Server `json:"servers"`
}

// Server is one server's pinned tools, sorted by name.
type Server struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Tools []Tool `json:"tools"`
}

// Tool is one pinned tool definition. InputSchema is canonical JSON
// (object keys sorted, no insignificant space), so the same schema always
// hashes the same whatever order the server wrote it in.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Hash is "sha256:" and the hex SHA-256 of the canonical JSON of
	// name, description and input_schema.
	Hash string `json:"hash"`
}

// LockPath is the lock file beside specPath.
func LockPath(specPath string) string {
	return strings.TrimSuffix(specPath, filepath.Ext(specPath)) + LockSuffix
}

// NewTool builds a pinned tool from a server's definition, canonicalising
// the schema and computing the hash.
func NewTool(name, description string, inputSchema []byte) (Tool, error) {
	schema, err := canonical(inputSchema)
	if err != nil {
		return Tool{}, fmt.Errorf("tool %s: canonicalising input schema: %w", name, err)
	}
	t := Tool{Name: name, Description: description, InputSchema: schema}
	t.Hash = t.hash()
	return t, nil
}

func (t Tool) hash() string {
	doc, _ := json.Marshal(struct { // strings and raw canonical JSON always encode
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}{t.Name, t.Description, t.InputSchema})
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonical re-encodes JSON with sorted object keys and exact numbers;
// empty input is the empty object.
func canonical(raw []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the schema")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// NewServer pins tools for server name at url: only the tools in expose
// when it is not empty (the spec's tools list), every tool otherwise.
func NewServer(name, url string, tools []Tool, expose []string) Server {
	s := Server{Name: name, URL: url, Tools: []Tool{}}
	for _, t := range tools {
		if len(expose) == 0 || slices.Contains(expose, t.Name) {
			s.Tools = append(s.Tools, t)
		}
	}
	slices.SortFunc(s.Tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// Server returns the pinned server called name.
func (l *Lock) Server(name string) (Server, bool) {
	if l == nil {
		return Server{}, false
	}
	for _, s := range l.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}

// Put replaces (or adds) a server's pin, keeping the servers sorted.
func (l *Lock) Put(s Server) {
	l.Schema = Schema
	l.Servers = slices.DeleteFunc(l.Servers, func(x Server) bool { return x.Name == s.Name })
	l.Servers = append(l.Servers, s)
	slices.SortFunc(l.Servers, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
}

// Marshal is the lock file's bytes: indented, one trailing newline.
func (l *Lock) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(l); err != nil {
		return nil, fmt.Errorf("encoding lock: %w", err)
	}
	return buf.Bytes(), nil
}

// Parse reads a lock file's bytes and checks every hash: a lock edited by
// hand so that a definition no longer matches its hash is refused, rather
// than trusted either way.
func Parse(data []byte) (*Lock, error) {
	var l Lock
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("reading lock: %w", err)
	}
	if l.Schema != Schema {
		return nil, fmt.Errorf("reading lock: schema %q, want %q", l.Schema, Schema)
	}
	seen := map[string]bool{}
	for i, s := range l.Servers {
		if seen[s.Name] {
			return nil, fmt.Errorf("reading lock: server %q pinned twice", s.Name)
		}
		seen[s.Name] = true
		for j, t := range s.Tools {
			c, err := NewTool(t.Name, t.Description, t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("reading lock: server %s: %w", s.Name, err)
			}
			if c.Hash != t.Hash {
				return nil, fmt.Errorf("reading lock: server %s tool %s: hash %s does not match its definition (%s); re-pin with `mcpsidecar mcp pin --update`", s.Name, t.Name, t.Hash, c.Hash)
			}
			l.Servers[i].Tools[j] = c
		}
	}
	return &l, nil
}

// Load reads the lock file at path; a missing file is (nil, nil): nothing
// is pinned yet.
func Load(path string) (*Lock, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening lock: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(&limited{f: f, left: maxLockBytes + 1}); err != nil {
		return nil, fmt.Errorf("reading lock %s: %w", path, err)
	}
	if buf.Len() > maxLockBytes {
		return nil, fmt.Errorf("reading lock %s: larger than %d bytes", path, maxLockBytes)
	}
	l, err := Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

type limited struct {
	f    *os.File
	left int64
}

func (r *limited) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, errors.New("too large")
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.f.Read(p)
	r.left -= int64(n)
	return n, err
}

// Save writes the lock to path atomically (a temporary file renamed over
// it), so a reader never sees half a lock.
func (l *Lock) Save(path string) error {
	data, err := l.Marshal()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mcp-lock-*")
	if err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing lock: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	return nil
}
