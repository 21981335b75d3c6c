package mcppin

import (
	"fmt"
	"slices"
	"strings"
)

// Kinds of [Change].
const (
	Changed = "changed"
	Added   = "added"
	Removed = "removed"
)

// Change is one tool whose definition differs from its pin.
type Change struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Kind   string `json:"kind"` // Changed, Added or Removed
	// Fields are what changed: "description", "input_schema" (Changed only).
	Fields  []string `json:"fields,omitempty"`
	OldHash string   `json:"old_hash,omitempty"`
	NewHash string   `json:"new_hash,omitempty"`
	// Old and New are the two definitions (for the diff a person reads).
	Old *Tool `json:"-"`
	New *Tool `json:"-"`
}

// String is one line: "server docs: tool search changed (description)".
func (c Change) String() string {
	s := fmt.Sprintf("server %s: tool %s %s", c.Server, c.Tool, c.Kind)
	if len(c.Fields) > 0 {
		s += " (" + strings.Join(c.Fields, ", ") + ")"
	}
	return s
}

// Compare lists how got (the server's tools now, as [NewServer] pinned
// them) differs from pinned, sorted by tool name: nil when they agree.
func Compare(pinned, got Server) []Change {
	old := map[string]Tool{}
	for _, t := range pinned.Tools {
		old[t.Name] = t
	}
	var out []Change
	seen := map[string]bool{}
	for _, t := range got.Tools {
		seen[t.Name] = true
		o, ok := old[t.Name]
		switch {
		case !ok:
			out = append(out, Change{Server: got.Name, Tool: t.Name, Kind: Added, NewHash: t.Hash, New: ptr(t)})
		case o.Hash != t.Hash:
			out = append(out, Change{Server: got.Name, Tool: t.Name, Kind: Changed, Fields: fields(o, t),
				OldHash: o.Hash, NewHash: t.Hash, Old: ptr(o), New: ptr(t)})
		}
	}
	for _, t := range pinned.Tools {
		if !seen[t.Name] {
			out = append(out, Change{Server: got.Name, Tool: t.Name, Kind: Removed, OldHash: t.Hash, Old: ptr(t)})
		}
	}
	sortChanges(out)
	return out
}

func ptr[T any](v T) *T { return &v }

func fields(a, b Tool) []string {
	var f []string
	if a.Description != b.Description {
		f = append(f, "description")
	}
	if string(a.InputSchema) != string(b.InputSchema) {
		f = append(f, "input_schema")
	}
	return f
}

func sortChanges(cs []Change) {
	slices.SortStableFunc(cs, func(a, b Change) int { return strings.Compare(a.Tool, b.Tool) })
}

// Diff is the difference a person reads: per change, the old and new
// description and input schema, "-" for the pinned line and "+" for the
// server's.
func Diff(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s\n", c)
		if c.Old != nil && (c.Kind == Removed || fieldChanged(c, "description")) {
			fmt.Fprintf(&b, "  - description: %q\n", c.Old.Description)
		}
		if c.New != nil && (c.Kind == Added || fieldChanged(c, "description")) {
			fmt.Fprintf(&b, "  + description: %q\n", c.New.Description)
		}
		if c.Old != nil && (c.Kind == Removed || fieldChanged(c, "input_schema")) {
			fmt.Fprintf(&b, "  - input_schema: %s\n", c.Old.InputSchema)
		}
		if c.New != nil && (c.Kind == Added || fieldChanged(c, "input_schema")) {
			fmt.Fprintf(&b, "  + input_schema: %s\n", c.New.InputSchema)
		}
	}
	return b.String()
}

func fieldChanged(c Change, f string) bool { return slices.Contains(c.Fields, f) }
