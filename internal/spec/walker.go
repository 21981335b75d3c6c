package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Top-level keys and environment variable keys, spelled exactly.
const (
	keySchema  = "schema_version"
	keyCaps    = "capabilities"
	keyDomains = "allowed_domains"
	keyIPs     = "allowed_ip_addresses"
	keyEnv     = "environment_variables"
	keyName    = "name"
	keyValue   = "value"
	keyHost    = "from_host"
)

var (
	topKeys = []string{keySchema, keyCaps, keyDomains, keyIPs, keyEnv, keyCreds, keyCredsInSandbox, keyAgentTelemetry, keyMCPServers, KeyBestEffort}
	// tables are the spec's arrays of tables, as messages name them.
	tables  = []string{keyEnv, keyCreds, keyMCPServers}
	envKeys = []string{keyHost, keyName, keyValue}
)

// pos is a 1-based line and column.
type pos struct{ line, col int }

// item is a string list element with its position.
type item struct {
	val  string
	at   pos
	path string // key path, e.g. "capabilities[2]"
}

// envEntry is one [[environment_variables]] table as written.
type envEntry struct {
	at       pos
	index    int
	name     *item
	value    *item
	fromHost *pos // position of a from_host = true
	sawHost  bool
	sawValue bool
	notTable bool // reported already; no further checks
}

// walker checks the syntax tree of a spec, collecting problems.
type walker struct {
	file     string
	parser   unstable.Parser
	spec     *Spec
	problems Problems

	seen       map[string]pos // top-level keys present
	caps       []item
	domains    []item
	ips        []item
	envs       []*envEntry
	inEnv      bool // expressions belong to the last envs entry
	creds      []*credEntry
	inCred     bool // expressions belong to the last creds entry
	mcps       []*mcpEntry
	inMCP      bool // expressions belong to the last mcps entry
	inOther    bool // expressions belong to an unknown table (already reported)
	work       *workloadEntry
	bestEffort []item // hardening_best_effort, as written
	inWork     bool   // expressions belong to the [workload] table
}

func (w *walker) add(at pos, key, format string, args ...any) {
	w.problems.List = append(w.problems.List, Problem{
		File: w.file, Line: at.line, Col: at.col, Key: key, Message: fmt.Sprintf(format, args...),
	})
}

// warn records a warning: the spec stays valid.
func (w *walker) warn(at pos, key, format string, args ...any) {
	w.spec.Warnings = append(w.spec.Warnings, Problem{
		File: w.file, Line: at.line, Col: at.col, Key: key, Message: fmt.Sprintf(format, args...),
	})
}

// pos is where n starts, or fallback for nodes without a source range
// (arrays).
func (w *walker) pos(n *unstable.Node, fallback pos) pos {
	if n == nil {
		return fallback
	}
	if n.Raw.Length == 0 {
		// An array has no range of its own: use its first element's.
		if c := n.Child(); c != nil {
			return w.pos(c, fallback)
		}
		return fallback
	}
	s := w.parser.Shape(n.Raw)
	return pos{s.Start.Line, s.Start.Column}
}

func (w *walker) walk(data []byte) {
	w.seen = map[string]pos{}
	w.parser.Reset(data)
	for w.parser.NextExpression() {
		e := w.parser.Expression()
		switch e.Kind {
		case unstable.KeyValue:
			w.keyValue(e)
		case unstable.Table:
			w.table(e)
		case unstable.ArrayTable:
			w.arrayTable(e)
		}
	}
	if err := w.parser.Error(); err != nil { // already caught by the decoder
		w.add(pos{}, "", "TOML: %v", err)
	}
}

// keyParts returns a key's parts and the position of its first part.
func (w *walker) keyParts(it unstable.Iterator) ([]string, pos) {
	var parts []string
	var at pos
	for it.Next() {
		if parts == nil {
			at = w.pos(it.Node(), pos{})
		}
		parts = append(parts, string(it.Node().Data))
	}
	return parts, at
}

func joinKey(parts []string) string { return strings.Join(parts, ".") }

// known checks that key is spelled exactly like one of want. go-toml's
// decoder would accept "Name" for "name"; the spec does not.
func (w *walker) known(key string, at pos, path string, want []string) bool {
	for _, k := range want {
		if key == k {
			return true
		}
		if strings.EqualFold(key, k) {
			w.add(at, path, "key is not spelled exactly like the known key %q (keys are case-sensitive)", k)
			return false
		}
	}
	w.add(at, path, "unknown key; supported keys: %s", strings.Join(want, ", "))
	return false
}

// tablesHint names the spec's tables for an unknown-table message.
func tablesHint() string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = "[[" + t + "]]"
	}
	return "unknown table; the tables are " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func (w *walker) table(e *unstable.Node) {
	parts, at := w.keyParts(e.Key())
	w.inEnv, w.inCred, w.inMCP, w.inOther, w.inWork = false, false, false, true, false
	if w.workloadTable(parts, at) {
		return
	}
	if len(parts) == 1 && slices.Contains(tables, parts[0]) {
		w.add(at, parts[0], "must be an array of tables: write [[%s]]", parts[0])
		return
	}
	w.add(at, joinKey(parts), "%s", tablesHint())
}

func (w *walker) arrayTable(e *unstable.Node) {
	parts, at := w.keyParts(e.Key())
	w.inEnv, w.inCred, w.inMCP, w.inOther, w.inWork = false, false, false, true, false
	key := joinKey(parts)
	if w.workloadArrayTable(key, at) {
		return
	}
	if key == keyMCPServers {
		w.inMCP, w.inOther = true, false
		w.seen[keyMCPServers] = at
		w.mcps = append(w.mcps, &mcpEntry{at: at, index: len(w.mcps), fields: map[string]*item{}})
		return
	}
	if key == keyCreds {
		w.inCred, w.inOther = true, false
		w.seen[keyCreds] = at
		w.creds = append(w.creds, &credEntry{at: at, index: len(w.creds), fields: map[string]*item{}})
		return
	}
	if key != keyEnv {
		w.add(at, key, "%s", tablesHint())
		return
	}
	w.inEnv, w.inOther = true, false
	w.seen[keyEnv] = at
	w.envs = append(w.envs, &envEntry{at: at, index: len(w.envs)})
}

func (w *walker) keyValue(e *unstable.Node) {
	parts, at := w.keyParts(e.Key())
	switch {
	case w.inOther:
		return
	case w.inEnv:
		w.envKey(w.envs[len(w.envs)-1], parts, at, e.Value())
	case w.inCred:
		w.credKey(w.creds[len(w.creds)-1], parts, at, e.Value())
	case w.inMCP:
		w.mcpKey(w.mcps[len(w.mcps)-1], parts, at, e.Value())
	case w.inWork:
		w.workloadKey(parts, at, e.Value())
	case w.workloadTopKey(parts, at):
	default:
		w.topKey(parts, at, e.Value())
	}
}

func (w *walker) topKey(parts []string, at pos, v *unstable.Node) {
	key := joinKey(parts)
	if len(parts) != 1 {
		w.add(at, key, "unknown key; supported keys: %s", strings.Join(topKeys, ", "))
		return
	}
	if !w.known(key, at, key, topKeys) {
		return
	}
	w.seen[key] = at
	switch key {
	case keySchema:
		w.schema(at, v)
	case keyCaps:
		w.caps = w.stringList(key, at, v)
	case keyDomains:
		w.domains = w.stringList(key, at, v)
	case keyIPs:
		w.ips = w.stringList(key, at, v)
	case keyEnv:
		w.inlineEnv(at, v)
	case keyCreds:
		w.add(at, keyCreds, "write each credential as a [[credentials]] table")
	case keyCredsInSandbox:
		w.credsInSandbox(at, v)
	case keyAgentTelemetry:
		w.agentTelemetry(at, v)
	case KeyBestEffort:
		w.bestEffort = w.stringList(key, at, v)
	case keyMCPServers:
		w.add(at, keyMCPServers, "write each server as a [[mcp_servers]] table")
	}
}

func (w *walker) schema(at pos, v *unstable.Node) {
	if v.Kind != unstable.Integer {
		w.add(w.pos(v, at), keySchema, "must be the integer 1, not %s", kindName(v))
		return
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(string(v.Data), "_", ""), 0, 64)
	if err != nil || n != 1 {
		w.add(w.pos(v, at), keySchema, "unsupported schema_version %s: only 1 is supported", v.Data)
		return
	}
	w.spec.SchemaVersion = 1
}

// stringList reads an array of strings, reporting each non-string.
func (w *walker) stringList(key string, at pos, v *unstable.Node) []item {
	if v.Kind != unstable.Array {
		w.add(at, key, "must be an array of strings, not %s", kindName(v))
		return nil
	}
	out := []item{}
	i := 0
	for it := v.Children(); it.Next(); {
		n := it.Node()
		if n.Kind == unstable.Comment {
			continue
		}
		path := fmt.Sprintf("%s[%d]", key, i)
		i++
		if n.Kind != unstable.String {
			w.add(w.pos(n, at), path, "must be a string, not %s", kindName(n))
			continue
		}
		out = append(out, item{string(n.Data), w.pos(n, at), path})
	}
	return out
}

func kindName(n *unstable.Node) string {
	switch n.Kind {
	case unstable.String:
		return "a string"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Bool:
		return "a boolean"
	case unstable.Array:
		return "an array"
	case unstable.InlineTable:
		return "a table"
	default:
		return "a date/time"
	}
}
