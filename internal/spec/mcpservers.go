package spec

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// Declared MCP servers: the upstreams the sidecar proxies. The threats
// each rule answers: a server reached over plain HTTP on the open network
// (its answers and its credential readable and forgeable on the way), a
// server outside the allowlist (the sidecar would reach a host the spec
// never opened), two servers the gateway cannot tell apart (one would use
// the other's scope and credential), and a tool that silently shadows
// another server's tool of the same name.

// Spec keys of [[mcp_servers]].
const (
	keyMCPServers  = "mcp_servers"
	keyMCPName     = "name"
	keyMCPURL      = "url"
	keyMCPTools    = "tools"
	keyMCPOnDrift  = "on_drift"
	keyMCPPrefixed = "prefix_tools"
)

var mcpKeys = []string{keyMCPName, keyMCPOnDrift, keyMCPPrefixed, keyMCPTools, keyMCPURL}

// Drift policies, in [MCPServer.OnDrift].
const (
	DriftFail = "fail"
	DriftWarn = "warn"
)

// The default server: with mcp_client and no [[mcp_servers]], the sidecar
// proxies the Microsoft Learn server's three tools, as the seed did.
const (
	DefaultMCPName = "learn"
	DefaultMCPURL  = "https://learn.microsoft.com/api/mcp"
)

// DefaultMCPTools are the default server's tools (package
// internal/sidecar/learn publishes their schemas; a test in internal/sidecar keeps the
// two lists equal).
var DefaultMCPTools = []string{"microsoft_docs_search", "microsoft_docs_fetch", "microsoft_code_sample_search"}

// LocalToolNames are the sidecar's own tools: no upstream tool may take
// one of these names.
var LocalToolNames = []string{"get_html_element_name"}

// PrefixSeparator joins a server's name and a tool's name when the server
// asks for prefixed names: "github_search_issues".
const PrefixSeparator = "_"

// MCPServer is one [[mcp_servers]] entry, as validated.
type MCPServer struct {
	Name string `json:"name"`
	// URL is the server's streamable HTTP endpoint.
	URL string `json:"url"`
	// Tools are the tools exposed to the agent (upstream names); empty
	// exposes every tool the server lists (and the pin records).
	Tools []string `json:"tools,omitempty"`
	// OnDrift is [DriftFail] or [DriftWarn].
	OnDrift string `json:"on_drift"`
	// Prefixed exposes each tool as Name + [PrefixSeparator] + tool.
	Prefixed bool `json:"prefix_tools,omitempty"`
	// Default marks the built-in Learn server (mcp_client without
	// [[mcp_servers]]).
	Default bool `json:"default,omitempty"`
}

// Host is the server URL's host:port as the gateway sees it ("name" for
// https on 443, "name:port" otherwise).
func (m MCPServer) Host() string {
	u, err := url.Parse(m.URL)
	if err != nil {
		return ""
	}
	host, port := strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), u.Port()
	switch {
	case port == "" && u.Scheme == "http":
		port = "80"
	case port == "":
		port = "443"
	}
	if port == "443" && u.Scheme == "https" {
		return host
	}
	return net.JoinHostPort(host, port)
}

// ExposedName is how tool appears to the agent.
func (m MCPServer) ExposedName(tool string) string {
	if m.Prefixed {
		return m.Name + PrefixSeparator + tool
	}
	return tool
}

// DefaultMCPServer is the server a spec with mcp_client and no
// [[mcp_servers]] gets.
func DefaultMCPServer() MCPServer {
	return MCPServer{Name: DefaultMCPName, URL: DefaultMCPURL, Tools: slices.Clone(DefaultMCPTools), OnDrift: DriftFail, Default: true}
}

// Servers are the MCP servers the sidecar proxies: the declared ones, or
// the default Learn server when the spec has mcp_client and declares none;
// none without mcp_client.
func (s *Spec) Servers() []MCPServer {
	if !s.Has(CapMCPClient) {
		return nil
	}
	if len(s.MCPServers) > 0 {
		return slices.Clone(s.MCPServers)
	}
	return []MCPServer{DefaultMCPServer()}
}

// mcpEntry is one [[mcp_servers]] table as written.
type mcpEntry struct {
	at       pos
	index    int
	fields   map[string]*item
	tools    []item
	sawTools bool
	prefixed bool
}

func (e *mcpEntry) path(key string) string { return entryPath(keyMCPServers, e.index, key) }

func (w *walker) mcpKey(e *mcpEntry, parts []string, at pos, v *unstable.Node) {
	key := joinKey(parts)
	switch {
	case len(parts) == 1 && slices.Contains(topKeys, key):
		w.add(at, e.path(key), "unknown key; top-level keys must come before the first [[mcp_servers]]")
		return
	case len(parts) != 1:
		w.add(at, e.path(key), "unknown key; supported keys: %s", strings.Join(mcpKeys, ", "))
		return
	case !w.known(key, at, e.path(key), mcpKeys):
		return
	}
	vat := w.pos(v, at)
	switch key {
	case keyMCPTools:
		e.sawTools = true
		e.tools = w.stringList(e.path(key), at, v)
	case keyMCPPrefixed:
		if v.Kind != unstable.Bool {
			w.add(vat, e.path(key), "must be true or false, not %s", kindName(v))
			return
		}
		e.prefixed = string(v.Data) == "true"
	default:
		if v.Kind != unstable.String {
			w.add(vat, e.path(key), "must be a string, not %s", kindName(v))
			return
		}
		e.fields[key] = &item{string(v.Data), vat, e.path(key)}
	}
}

// mcpNameRE is a server name: short, lower-case, usable as a tool-name
// prefix and in log lines.
var mcpNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// toolNameRE is an MCP tool name (the MCP spec's characters and length).
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// checkMCPServers validates each entry and copies the valid ones into the
// spec. It runs after the allowlists and capabilities are known.
func (w *walker) checkMCPServers() {
	if len(w.mcps) == 0 {
		return
	}
	if !w.spec.Has(CapMCPClient) {
		w.add(w.mcps[0].at, keyMCPServers, "requires the mcp_client capability (the sidecar proxies declared servers)")
		return
	}
	pol := w.credPolicy()
	names, hosts := map[string]pos{}, map[string]pos{}
	var valid []*mcpEntry
	var servers []MCPServer
	for _, e := range w.mcps {
		m, ok := w.checkMCP(e, pol)
		if !ok {
			continue
		}
		if p, dup := names[m.Name]; dup {
			w.add(e.fields[keyMCPName].at, e.path(keyMCPName), "duplicate server name %q (first declared at line %d)", m.Name, p.line)
			continue
		}
		if p, dup := hosts[m.Host()]; dup {
			w.add(e.fields[keyMCPURL].at, e.path(keyMCPURL), "host %s already serves the server at line %d: the gateway scopes egress and credentials by host, so two servers on one host cannot be told apart", m.Host(), p.line)
			continue
		}
		names[m.Name], hosts[m.Host()] = e.at, e.at
		valid = append(valid, e)
		servers = append(servers, m)
	}
	if len(valid) != len(w.mcps) {
		return // collisions are judged on a complete list only
	}
	if w.checkToolCollisions(valid, servers) && w.checkServerCreds(valid, servers) {
		w.spec.MCPServers = servers
	}
}

// checkServerCreds refuses a credential for a server reached over plain
// http: the gateway sends credentials over verified TLS only, and a token
// in clear on the way would be readable by anything on the path.
func (w *walker) checkServerCreds(entries []*mcpEntry, servers []MCPServer) bool {
	ok := true
	for i, m := range servers {
		if !strings.HasPrefix(m.URL, "http://") {
			continue
		}
		for _, e := range w.creds {
			h := e.fields[keyCredHost]
			if h == nil {
				continue
			}
			if n, port, err := credHost(h.val); err == nil && hostPort(n, port) == m.Host() {
				w.add(entries[i].fields[keyMCPURL].at, entries[i].path(keyMCPURL), "server %q is plain http, but credentials[%d] (line %d) holds a credential for its host: a credential goes only over https", m.Name, e.index, e.at.line)
				ok = false
			}
		}
	}
	return ok
}

func (w *walker) checkMCP(e *mcpEntry, pol *netpolicy.Policy) (MCPServer, bool) {
	for _, k := range []string{keyMCPName, keyMCPURL} {
		if e.fields[k] == nil {
			w.add(e.at, e.path(""), "missing %s (a server needs name and url)", k)
			return MCPServer{}, false
		}
	}
	ok := true
	fail := func(at pos, key, format string, args ...any) {
		w.add(at, e.path(key), format, args...)
		ok = false
	}
	m := MCPServer{Name: e.fields[keyMCPName].val, OnDrift: DriftFail, Prefixed: e.prefixed}
	if !mcpNameRE.MatchString(m.Name) {
		fail(e.fields[keyMCPName].at, keyMCPName, "invalid server name %q: use 1 to 32 lower-case letters, digits and -, starting with a letter", m.Name)
	}
	if f := e.fields[keyMCPOnDrift]; f != nil {
		if f.val != DriftFail && f.val != DriftWarn {
			fail(f.at, keyMCPOnDrift, "unknown drift policy %q: write %q (refuse a server whose tools changed) or %q (allow it, with a warning)", f.val, DriftFail, DriftWarn)
		}
		m.OnDrift = f.val
	}
	u, err := w.checkMCPURL(e.fields[keyMCPURL].val, pol)
	if err != nil {
		fail(e.fields[keyMCPURL].at, keyMCPURL, "%v", err)
	}
	m.URL = u
	if e.sawTools && len(e.tools) == 0 && ok {
		fail(e.at, keyMCPTools, "is empty: list the tools to expose, or leave tools out to expose every tool the server lists")
	}
	seen := map[string]pos{}
	for _, t := range e.tools {
		switch p, dup := seen[t.val]; {
		case !toolNameRE.MatchString(t.val):
			w.add(t.at, t.path, "invalid tool name %q: use 1 to 128 letters, digits, _, - and .", t.val)
			ok = false
		case dup:
			w.add(t.at, t.path, "tool %q listed twice (first at line %d)", t.val, p.line)
			ok = false
		default:
			seen[t.val] = t.at
			m.Tools = append(m.Tools, t.val)
		}
	}
	return m, ok
}

// checkMCPURL admits an https URL whose host:port the allowlist opens, or
// an http URL whose host:port an allowlist entry names explicitly, with
// its port ("mcp.test:8080"): plain HTTP only where the spec's author
// wrote that exact destination down.
func (w *walker) checkMCPURL(raw string, pol *netpolicy.Policy) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return raw, fmt.Errorf("invalid server url %q: write an absolute https URL, e.g. \"https://mcp.example.com/mcp\"", raw)
	}
	switch {
	case u.User != nil:
		return raw, fmt.Errorf("server url %q carries credentials: declare them as [[credentials]] for the server's host, where the gateway holds them", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return raw, fmt.Errorf("server url %q has a fragment: remove it", raw)
	case u.Scheme != "https" && u.Scheme != "http":
		return raw, fmt.Errorf("server url %q: scheme %q is not https", raw, u.Scheme)
	}
	host, err := netpolicy.NormalizeHost(strings.TrimSuffix(u.Hostname(), "."))
	if err != nil {
		return raw, fmt.Errorf("server url %q: %v", raw, err)
	}
	port := uint16(443)
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, perr := strconv.ParseUint(p, 10, 16)
		if perr != nil || n == 0 {
			return raw, fmt.Errorf("server url %q: invalid port %q", raw, p)
		}
		port = uint16(n)
	}
	if pol == nil {
		return raw, nil // the allowlist itself is invalid (reported)
	}
	rule, allowed := pol.Allows(host, port, u.Scheme == "https")
	if !allowed {
		return raw, fmt.Errorf("server host %s is not allowed by allowed_domains/allowed_ip_addresses (%s to port %d): add it, or remove the server", host, strings.ToUpper(u.Scheme), port)
	}
	if u.Scheme == "http" && !namesPort(rule) {
		return raw, fmt.Errorf("server url %q is not https: plain http is accepted only for a host:port entry written in the allowlist (e.g. %q); %q opens the default ports", raw, net.JoinHostPort(host, strconv.Itoa(int(port))), rule)
	}
	return raw, nil
}

// namesPort reports whether an allowlist rule names one port.
func namesPort(rule string) bool {
	if r, err := netpolicy.ParseDomainRule(rule); err == nil {
		return r.Port != 0
	}
	if r, err := netpolicy.ParseIPRule(rule); err == nil {
		return r.Port != 0
	}
	return false
}

// checkToolCollisions refuses two servers exposing a tool under one name,
// and an upstream tool named like a local one. A server that lists no
// tools exposes whatever it lists at connect, which no spec check can
// see: with several servers, each must list its tools or be prefixed.
func (w *walker) checkToolCollisions(entries []*mcpEntry, servers []MCPServer) bool {
	ok := true
	type owner struct {
		server string
		line   int
	}
	exposed := map[string]owner{}
	for _, n := range LocalToolNames {
		exposed[n] = owner{server: "the sidecar's local tools"}
	}
	for i, m := range servers {
		e := entries[i]
		if len(m.Tools) == 0 && !m.Prefixed && len(servers) > 1 {
			w.add(e.at, e.path(""), "with several servers, a server must list its tools or set prefix_tools = true, so that tool names cannot collide")
			ok = false
			continue
		}
		for j, t := range m.Tools {
			name := m.ExposedName(t)
			at := toolAt(e, t, j)
			if o, dup := exposed[name]; dup {
				where := o.server
				if o.line > 0 {
					where = fmt.Sprintf("server %q (line %d)", o.server, o.line)
				}
				w.add(at.at, at.path, "tool name %q collides with %s: set prefix_tools = true on one of them", name, where)
				ok = false
				continue
			}
			exposed[name] = owner{m.Name, e.at.line}
		}
	}
	return ok
}

// toolAt finds the written item of a server's tool t.
func toolAt(e *mcpEntry, t string, fallback int) item {
	for _, it := range e.tools {
		if it.val == t {
			return it
		}
	}
	return item{val: t, at: e.at, path: e.path(fmt.Sprintf("%s[%d]", keyMCPTools, fallback))}
}

// normalizedServers is the spec hash's form of the declared servers.
func normalizedServers(in []MCPServer) []map[string]any {
	out := make([]map[string]any, 0, len(in))
	for _, m := range in {
		d := map[string]any{"name": m.Name, "url": m.URL, "on_drift": m.OnDrift, "prefix_tools": m.Prefixed}
		if len(m.Tools) > 0 {
			d["tools"] = m.Tools
		}
		out = append(out, d)
	}
	return out
}

// Environment and files of declared servers in a run.
const (
	// EnvMCPServers is the declared servers, JSON [[]MCPServer], given
	// to the sidecar (which proxies them) and the gateway (which scopes
	// egress by them). Only with [[mcp_servers]]: the built-in Learn
	// default keeps the unscoped behaviour of the seed.
	EnvMCPServers = "MCPSIDECAR_MCP_SERVERS"
	// EnvMCPPins is the lock's entries for the declared servers (an
	// mcppin lock, JSON), set by the harness at run time.
	EnvMCPPins = "MCPSIDECAR_MCP_PINS"
	// FileMCPPins is where the sidecar saves the definitions it observed,
	// in its output directory.
	FileMCPPins = "mcp-tool-pins.json"
)

// RunServer is one entry of [EnvMCPServers]: a declared server and, when
// the gateway holds a credential for its host, the header and format the
// sidecar's requests carry the run's placeholder in (never the value).
type RunServer struct {
	MCPServer
	CredentialHeader string `json:"credential_header,omitempty"`
	CredentialFormat string `json:"credential_format,omitempty"`
}

// runServers pairs each declared server with its credential, when the
// gateway holds one (not with credentials_in_sandbox, which gives the
// agent the values, never the sidecar).
func runServers(s *Spec) []RunServer {
	out := make([]RunServer, 0, len(s.MCPServers))
	for _, m := range s.MCPServers {
		r := RunServer{MCPServer: m}
		for _, c := range s.Credentials {
			if c.Host == m.Host() && !s.CredentialsInSandbox {
				r.CredentialHeader, r.CredentialFormat = c.Header, c.Format
			}
		}
		out = append(out, r)
	}
	return out
}

// addMCPServersEnv gives the sidecar and the gateway the declared servers;
// a sidecar with a credentialed server may also reach the credential
// listener.
func (p *Profile) addMCPServersEnv(s *Spec) error {
	if len(s.MCPServers) == 0 {
		return nil
	}
	servers := runServers(s)
	js, err := json.Marshal(servers)
	if err != nil {
		return fmt.Errorf("encoding mcp_servers: %w", err)
	}
	for _, role := range []string{RoleSidecar, RoleGateway} {
		c, ok := p.Containers[role]
		if !ok {
			continue
		}
		c.Env[EnvMCPServers] = string(js)
		if role == RoleSidecar {
			c.Cmd = append(c.Cmd, "--pins-out", OutputDir+"/"+FileMCPPins)
			if slices.ContainsFunc(servers, func(r RunServer) bool { return r.CredentialHeader != "" }) {
				c.Harden.Landlock.ConnectTCP = append(c.Harden.Landlock.ConnectTCP, CredentialPort)
			}
		}
		p.Containers[role] = c
	}
	return nil
}
