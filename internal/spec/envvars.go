package spec

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/pelletier/go-toml/v2/unstable"
)

// envNameRE is a portable environment variable name. The seed accepted any
// non-empty string, including "=" and spaces, which Docker then mangles.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// harnessVariables are variables the harness sets in a role's container
// for its own control, which no spec may set (red team, session 37: a
// spec's MCPSIDECAR_HOLD_FILE released the role before the host had
// read it), each with what it does.
var harnessVariables = map[string]string{
	hold.Env:      "the start hold's release file",
	hold.TokenEnv: "the start hold's release token",
}

// inlineEnv reads environment_variables written as an array of inline
// tables, the other TOML spelling of [[environment_variables]].
func (w *walker) inlineEnv(at pos, v *unstable.Node) {
	if v.Kind != unstable.Array {
		w.add(at, keyEnv, "must be an array of tables, not %s", kindName(v))
		return
	}
	for it := v.Children(); it.Next(); {
		n := it.Node()
		if n.Kind == unstable.Comment {
			continue
		}
		e := &envEntry{at: w.pos(n, at), index: len(w.envs)}
		w.envs = append(w.envs, e)
		if n.Kind != unstable.InlineTable {
			w.add(e.at, e.path(""), "must be a table with name and value or from_host, not %s", kindName(n))
			e.notTable = true
			continue
		}
		for kv := n.Children(); kv.Next(); {
			parts, kat := w.keyParts(kv.Node().Key())
			w.envKey(e, parts, kat, kv.Node().Value())
		}
	}
}

func (e *envEntry) path(key string) string { return entryPath(keyEnv, e.index, key) }

// entryPath is the key path of one entry of an array of tables, as every
// problem names it: "environment_variables[2].name".
func entryPath(table string, index int, key string) string {
	p := fmt.Sprintf("%s[%d]", table, index)
	if key != "" {
		p += "." + key
	}
	return p
}

func (w *walker) envKey(e *envEntry, parts []string, at pos, v *unstable.Node) {
	key := joinKey(parts)
	switch {
	case len(parts) == 1 && slices.Contains(topKeys, key):
		// TOML puts every key after a table header into that table.
		w.add(at, e.path(key), "unknown key; top-level keys must come before the first [[environment_variables]]")
		return
	case len(parts) != 1:
		w.add(at, e.path(key), "unknown key; supported keys: from_host, name, value")
		return
	case !w.known(key, at, e.path(key), envKeys):
		return
	}
	vat := w.pos(v, at)
	switch key {
	case keyName, keyValue:
		e.sawValue = e.sawValue || key == keyValue
		if v.Kind != unstable.String {
			w.add(vat, e.path(key), "must be a string, not %s", kindName(v))
			return
		}
		it := &item{string(v.Data), vat, e.path(key)}
		if key == keyName {
			e.name = it
		} else {
			e.value = it
		}
	case keyHost:
		e.sawHost = true
		if v.Kind != unstable.Bool || string(v.Data) != "true" {
			w.add(vat, e.path(key), "must be true (leave it out and set value instead)")
			return
		}
		e.fromHost = &vat
	}
}

// checkEnv validates each entry and copies the valid ones into the spec.
func (w *walker) checkEnv() {
	first := map[string]pos{}
	for _, e := range w.envs {
		if e.notTable {
			continue
		}
		if e.name == nil {
			w.add(e.at, e.path(""), "missing name")
		} else if !envNameRE.MatchString(e.name.val) {
			w.add(e.name.at, e.path(keyName), "invalid variable name %q: use letters, digits and _, not starting with a digit", e.name.val)
		} else if why, ok := harnessVariables[e.name.val]; ok {
			w.add(e.name.at, e.path(keyName), "%s is the harness's own variable (%s): a spec cannot set it", e.name.val, why)
		} else if p, dup := first[e.name.val]; dup {
			w.add(e.name.at, e.path(keyName), "duplicate environment variable %q (first declared at line %d)", e.name.val, p.line)
		} else {
			first[e.name.val] = e.name.at
		}
		hasValue, hasHost := e.sawValue, e.sawHost
		if hasValue == hasHost {
			w.add(e.at, e.path(""), "needs exactly one of value or from_host = true")
		}
		if e.name != nil && (e.value != nil || e.fromHost != nil) {
			v := EnvVar{Name: e.name.val, FromHost: e.fromHost != nil}
			if e.value != nil {
				v.Value = e.value.val
			}
			w.spec.Env = append(w.spec.Env, v)
		}
	}
}
