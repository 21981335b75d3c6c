package sidecar

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// URL-typed arguments of a declared server's tools are checked against
// that server's own host before anything is sent: the generalisation of
// microsoft_docs_fetch's check. The threat: a tool that takes a URL lets
// the agent (or a prompt injection steering it) make the server fetch an
// attacker-chosen host, or smuggle data out in the URL; and a server that
// follows it would act outside the scope the spec gave it.
//
// A value is URL-typed when its schema says "format": "uri" (or "url",
// "iri", "uri-reference", "iri-reference"), or when it is an object
// property named url or uri or ending in _url, _uri, Url, Uri or URL. Such a
// value must be an absolute URL with the server's own scheme (https, or
// http for a server declared on plain http), host and port, without
// credentials.
//
// The whole argument tree is walked, not only the top level: an object's
// "properties" (and "additionalProperties" when it is a schema), an
// array's "items" (a schema, or a list of them by position) and
// "prefixItems", every branch of "allOf", "anyOf" and "oneOf", and local
// "$ref"s ("#/$defs/…", "#/definitions/…"). What the server reads is what
// is checked, whatever its decoder:
//
//   - A key that equals a declared property's name but for case ("URL"
//     for "url") is refused: Go's encoding/json (the MCP go-sdk's typed
//     tool handlers) matches names case-insensitively and would read it
//     as that property, unchecked.
//   - A key the schema does not declare is refused when the schema says
//     "additionalProperties": false.
//   - Otherwise an undeclared key is forwarded (servers differ on what
//     they accept, and refusing every extra key would break tools whose
//     schemas are loose), but its value is held to the rule wherever a
//     server might read a URL in it: every string in it, at any depth,
//     that parses as an absolute URL with a host must be on the server's
//     own scheme, host and port; and under an undeclared URL-named key the
//     value must be such a URL.
//
// A refusal fails the call before it is sent; the audit line of the call
// carries the reason as its error.

var urlFormats = []string{"uri", "url", "iri", "uri-reference", "iri-reference"}

// maxArgDepth bounds how deep schemas and arguments are walked: a schema's
// "$ref"s may form a cycle, and a value nested deeper than any schema
// that declares it is refused rather than left unchecked.
const maxArgDepth = 64

func isURLName(n string) bool {
	l := strings.ToLower(n)
	return l == "url" || l == "uri" || strings.HasSuffix(l, "_url") || strings.HasSuffix(l, "_uri") ||
		strings.HasSuffix(n, "Url") || strings.HasSuffix(n, "Uri") || strings.HasSuffix(n, "URL")
}

// checkURLArgs checks tool's arguments against its input schema: every
// URL-typed value against serverURL's scheme, host and port, and every key
// against the names the schema declares (see the file comment).
func checkURLArgs(tool string, schema any, args map[string]any, serverURL string) error {
	server, err := url.Parse(serverURL)
	if err != nil {
		return fmt.Errorf("%s: server url %q: %v", tool, serverURL, err)
	}
	root, err := schemaMap(schema)
	if err != nil {
		return fmt.Errorf("%s: reading the tool's input schema: %v", tool, err)
	}
	c := &argChecker{root: root, server: server}
	if err := c.object(root, args, "", 0); err != nil {
		return fmt.Errorf("%s: %v", tool, err)
	}
	return nil
}

// schemaMap turns the tool's input schema (whatever the SDK holds it as)
// into plain JSON values.
func schemaMap(schema any) (map[string]any, error) {
	if schema == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	return m, nil
}

type argChecker struct {
	root   map[string]any
	server *url.URL
}

// node is one schema a value is held to, and whether it applies for sure
// (itself, an allOf branch) or only maybe (an anyOf or oneOf branch).
type node struct {
	s    map[string]any
	sure bool
}

// expand returns s with its allOf, anyOf and oneOf branches (recursively)
// and local $refs resolved.
func (c *argChecker) expand(s map[string]any, sure bool, depth int) ([]node, error) {
	if s == nil {
		return nil, nil
	}
	if depth > maxArgDepth {
		return nil, fmt.Errorf("the input schema nests combinators or $refs deeper than %d levels", maxArgDepth)
	}
	out := []node{{s, sure}}
	if ref, ok := s["$ref"].(string); ok {
		target := c.resolve(ref)
		if target == nil {
			return nil, fmt.Errorf("the input schema's $ref %q is not a local definition", ref)
		}
		more, err := c.expand(target, sure, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, _ := s[k].([]any)
		for _, b := range list {
			sub, _ := b.(map[string]any)
			more, err := c.expand(sub, sure && k == "allOf", depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
	}
	return out, nil
}

// resolve finds a local $ref ("#/$defs/x", "#/definitions/x", any JSON
// pointer into the schema), or nil.
func (c *argChecker) resolve(ref string) map[string]any {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	var cur any = c.root
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			cur = v[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			cur = v[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

func hasURLFormat(s map[string]any) bool {
	f, _ := s["format"].(string)
	return contains(urlFormats, strings.ToLower(f))
}

// value holds v, found at path, to schema s. byName says the property's
// name makes it URL-typed.
func (c *argChecker) value(s map[string]any, v any, path string, byName bool, depth int) error {
	if v == nil {
		return nil
	}
	if depth > maxArgDepth {
		return fmt.Errorf("argument %s is nested deeper than %d levels", path, maxArgDepth)
	}
	nodes, err := c.expand(s, true, 0)
	if err != nil {
		return err
	}
	urlSure, urlMaybe := byName, false
	for _, n := range nodes {
		if hasURLFormat(n.s) {
			urlSure = urlSure || n.sure
			urlMaybe = true
		}
	}
	switch x := v.(type) {
	case string:
		if urlSure || urlMaybe {
			if err := checkURLArg(x, c.server); err != nil {
				return fmt.Errorf("refusing argument %s=%q: %v", path, x, err)
			}
		}
		return nil
	case map[string]any:
		if urlSure {
			return fmt.Errorf("argument %s must be a URL string", path)
		}
		return c.objectNodes(nodes, x, path, depth)
	case []any:
		if urlSure {
			return fmt.Errorf("argument %s must be a URL string", path)
		}
		return c.array(nodes, x, path, depth)
	}
	if urlSure {
		return fmt.Errorf("argument %s must be a URL string", path)
	}
	return nil
}

// object holds the top-level arguments (or any object) to schema s.
func (c *argChecker) object(s map[string]any, obj map[string]any, path string, depth int) error {
	nodes, err := c.expand(s, true, 0)
	if err != nil {
		return err
	}
	return c.objectNodes(nodes, obj, path, depth)
}

func (c *argChecker) objectNodes(nodes []node, obj map[string]any, path string, depth int) error {
	props := map[string][]map[string]any{}
	closed := false
	var extra []map[string]any
	for _, n := range nodes {
		if p, ok := n.s["properties"].(map[string]any); ok {
			for name, ps := range p {
				sub, _ := ps.(map[string]any)
				props[name] = append(props[name], sub)
			}
		}
		switch ap := n.s["additionalProperties"].(type) {
		case bool:
			closed = closed || (!ap && n.sure)
		case map[string]any:
			extra = append(extra, ap)
		}
	}
	declared := make([]string, 0, len(props))
	for name := range props {
		declared = append(declared, name)
	}
	sort.Strings(declared)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first refusal is the same for the same call
	for _, k := range keys {
		v, at := obj[k], joinPath(path, k)
		if subs, ok := props[k]; ok {
			for _, sub := range subs {
				if err := c.value(sub, v, at, isURLName(k), depth+1); err != nil {
					return err
				}
			}
			continue
		}
		if i := slices.IndexFunc(declared, func(d string) bool { return strings.EqualFold(d, k) }); i >= 0 {
			return fmt.Errorf("refusing argument %s: it differs from the declared %s only in case, and a server decoding with Go's encoding/json would read it as %s unchecked",
				at, joinPath(path, declared[i]), declared[i])
		}
		if closed {
			return fmt.Errorf("refusing argument %s: the tool's schema does not declare it (additionalProperties is false)", at)
		}
		for _, sub := range extra {
			if err := c.value(sub, v, at, isURLName(k), depth+1); err != nil {
				return err
			}
		}
		if err := c.undeclared(v, at, isURLName(k), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (c *argChecker) array(nodes []node, arr []any, path string, depth int) error {
	for i, el := range arr {
		at := path + "[" + strconv.Itoa(i) + "]"
		for _, n := range nodes {
			var subs []map[string]any
			prefix, _ := n.s["prefixItems"].([]any)
			switch items := n.s["items"].(type) {
			case map[string]any:
				if i >= len(prefix) {
					subs = append(subs, items)
				}
			case []any: // the older tuple form
				if i < len(items) {
					sub, _ := items[i].(map[string]any)
					subs = append(subs, sub)
				}
			}
			if i < len(prefix) {
				sub, _ := prefix[i].(map[string]any)
				subs = append(subs, sub)
			}
			for _, sub := range subs {
				if sub == nil {
					continue
				}
				if err := c.value(sub, el, at, false, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// undeclared holds a value under a key no schema declares: every string in
// it that parses as an absolute URL with a host is held to the rule (a
// server may read it), and under a URL-named key the value must be one.
func (c *argChecker) undeclared(v any, path string, byName bool, depth int) error {
	if depth > maxArgDepth {
		return fmt.Errorf("argument %s is nested deeper than %d levels", path, maxArgDepth)
	}
	switch x := v.(type) {
	case string:
		if u, err := url.Parse(x); byName || (err == nil && u.IsAbs() && u.Host != "") {
			if err := checkURLArg(x, c.server); err != nil {
				return fmt.Errorf("refusing undeclared argument %s=%q: %v", path, x, err)
			}
		}
	case map[string]any:
		if byName {
			return fmt.Errorf("argument %s must be a URL string", path)
		}
		for k, el := range x {
			if err := c.undeclared(el, joinPath(path, k), isURLName(k), depth+1); err != nil {
				return err
			}
		}
	case []any:
		if byName {
			return fmt.Errorf("argument %s must be a URL string", path)
		}
		for i, el := range x {
			if err := c.undeclared(el, path+"["+strconv.Itoa(i)+"]", false, depth+1); err != nil {
				return err
			}
		}
	default:
		if byName && v != nil {
			return fmt.Errorf("argument %s must be a URL string", path)
		}
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func checkURLArg(raw string, server *url.URL) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return fmt.Errorf("not an absolute URL")
	}
	if u.User != nil {
		return fmt.Errorf("credentials in URLs are not allowed")
	}
	if !strings.EqualFold(u.Scheme, server.Scheme) {
		return fmt.Errorf("only %s URLs on the server's own host are accepted (scheme is %q)", server.Scheme, u.Scheme)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	want := strings.TrimSuffix(strings.ToLower(server.Hostname()), ".")
	if host != want {
		return fmt.Errorf("only URLs on the server's own host %s are accepted (host is %q)", want, host)
	}
	if effectivePort(u) != effectivePort(server) {
		return fmt.Errorf("only the server's own port %s is accepted (port is %s)", effectivePort(server), effectivePort(u))
	}
	return nil
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "http") {
		return "80"
	}
	return "443"
}
