package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
)

// Declared servers ([Config.Servers]): each gets its own upstream session
// (reconnect, timeout, size cap and no redirects, as the Learn upstream),
// and at each connect its tool list is checked: a listed tool it does not
// offer is refused, and the definitions are compared with the pin. Only
// the tools the spec lists (every tool when it lists none) are exposed,
// under the server's prefix when it asks for one.

// ServerConfig is one declared upstream MCP server.
type ServerConfig struct {
	Name string
	URL  string
	// Tools are the upstream tools exposed; empty: every tool listed.
	Tools []string
	// OnDrift is "fail" (refuse the server when a tool changed) or "warn".
	OnDrift string
	// Prefixed exposes each tool as Name_tool.
	Prefixed bool
	// Pin is the server's pinned tools; nil: nothing pinned yet, the
	// first connect's tools are recorded as observed.
	Pin *mcppin.Server
	// Credential, when set, routes the server's requests through the
	// gateway's credential listener (credroute.go) instead of the proxy.
	Credential *CredentialRoute
}

// Drift policies (spec.DriftFail, spec.DriftWarn).
const (
	driftFail = "fail"
	driftWarn = "warn"
)

// KindPinCheck is the audit kind of a declared server's connect-time
// check: Name is the server; OK is false when the server was refused.
const KindPinCheck = "pin_check"

// DriftError is the error of every call to a server refused for drift.
type DriftError struct {
	Server  string
	Changes []mcppin.Change
}

func (e *DriftError) Error() string {
	lines := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		lines[i] = c.String()
	}
	return fmt.Sprintf("server %s refused: its tools differ from the pin (on_drift = \"fail\"): %s; accept with `mcpsidecar mcp pin --update`",
		e.Server, strings.Join(lines, "; "))
}

// remote is one declared server.
type remote struct {
	s   *Sidecar
	cfg ServerConfig
	up  *upstream

	mu       sync.Mutex
	exposed  map[string]*mcp.Tool // exposed name -> upstream definition
	observed *mcppin.Server
	changes  []mcppin.Change
}

func (s *Sidecar) newRemote(sc ServerConfig) (*remote, error) {
	if sc.OnDrift == "" {
		sc.OnDrift = driftFail
	}
	if sc.OnDrift != driftFail && sc.OnDrift != driftWarn {
		return nil, fmt.Errorf("server %s: on_drift %q: want fail or warn", sc.Name, sc.OnDrift)
	}
	u, err := url.Parse(sc.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("server %s: url %q: want an absolute http(s) URL", sc.Name, sc.URL)
	}
	cfg := s.cfg
	cfg.UpstreamURL = sc.URL
	r := &remote{s: s, cfg: sc, exposed: map[string]*mcp.Tool{}}
	r.up = newUpstream(cfg, s.log)
	r.up.server = sc.Name
	r.up.check = r.check
	if sc.Credential != nil {
		direct := cfg
		direct.Proxy = nil // the listener is on the internal network, not behind the proxy
		ct, err := newCredTransport(newBaseTransport(direct), *sc.Credential)
		if err != nil {
			return nil, fmt.Errorf("server %s: credential listener %q: %w", sc.Name, sc.Credential.Listener, err)
		}
		r.up.http = &http.Client{Transport: &tracingTransport{base: ct, maxBytes: cfg.MaxUpstreamBytes}}
	}
	return r, nil
}

// exposedName is how an upstream tool appears to the agent.
func (r *remote) exposedName(tool string) string {
	if r.cfg.Prefixed {
		return r.cfg.Name + "_" + tool
	}
	return tool
}

// check runs at every (re)connect, with the new session: list the tools,
// refuse missing listed tools, compare with the pin, then (unless refused)
// expose the tools.
func (r *remote) check(ctx context.Context, sess *mcp.ClientSession) (map[string]error, error) {
	tools, err := listTools(ctx, sess)
	if err != nil {
		return nil, fmt.Errorf("listing tools of server %s: %w", r.cfg.Name, err)
	}
	snap, byName, problems := r.snapshot(tools)
	var changes []mcppin.Change
	if r.cfg.Pin != nil {
		changes = mcppin.Compare(*r.cfg.Pin, snap)
	}
	refused := len(changes) > 0 && r.cfg.OnDrift == driftFail
	r.recordCheck(ctx, snap, changes, refused)
	if refused {
		r.unexpose()
		return nil, &DriftError{Server: r.cfg.Name, Changes: changes}
	}
	r.expose(byName, problems)
	return problems, nil
}

// listTools reads every page of the server's tool list.
func listTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if len(out) > maxServerTools {
			return nil, fmt.Errorf("more than %d tools", maxServerTools)
		}
	}
	return out, nil
}

// maxServerTools bounds one server's tool list.
const maxServerTools = 1000

// snapshot pins the exposed tools as the server lists them now; a listed
// tool the server does not offer, or whose schema is not an object, is a
// per-tool problem.
func (r *remote) snapshot(tools []*mcp.Tool) (mcppin.Server, map[string]*mcp.Tool, map[string]error) {
	byName := map[string]*mcp.Tool{}
	var pins []mcppin.Tool
	problems := map[string]error{}
	for _, t := range tools {
		if len(r.cfg.Tools) > 0 && !contains(r.cfg.Tools, t.Name) {
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err == nil && !isObjectSchema(schema) {
			err = errors.New(`its input schema is not of type "object"`)
		}
		p, perr := mcppin.NewTool(t.Name, t.Description, schema)
		if err == nil {
			err = perr
		}
		if err != nil {
			problems[t.Name] = fmt.Errorf("server %s tool %s refused: %v", r.cfg.Name, t.Name, err)
			continue
		}
		pins = append(pins, p)
		byName[t.Name] = t
	}
	for _, name := range r.cfg.Tools {
		if _, ok := byName[name]; !ok && problems[name] == nil {
			problems[name] = fmt.Errorf("server %s does not offer tool %s (checked at connect); refusing to call it", r.cfg.Name, name)
		}
	}
	return mcppin.NewServer(r.cfg.Name, r.cfg.URL, pins, r.cfg.Tools), byName, problems
}

func isObjectSchema(b []byte) bool {
	var m map[string]any
	return json.Unmarshal(b, &m) == nil && m["type"] == "object"
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// expose registers the server's tools with the MCP server, replacing the
// previous definitions, and withdraws tools it no longer offers. A tool
// whose exposed name another server or a local tool already holds is
// refused.
func (r *remote) expose(tools map[string]*mcp.Tool, problems map[string]error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []string
	for name := range r.exposed {
		if _, ok := tools[r.upstreamName(name)]; !ok {
			gone = append(gone, name)
			delete(r.exposed, name)
		}
	}
	if len(gone) > 0 {
		r.s.server.RemoveTools(gone...)
	}
	for name, t := range tools {
		exp := r.exposedName(name)
		if owner := r.s.claimTool(exp, r.cfg.Name); owner != r.cfg.Name {
			problems[name] = fmt.Errorf("server %s tool %s refused: the name %s is already %s's", r.cfg.Name, name, exp, owner)
			continue
		}
		def := &mcp.Tool{Name: exp, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}
		r.exposed[exp] = t
		r.s.server.AddTool(def, r.handler(name))
	}
}

// upstreamName is the inverse of exposedName.
func (r *remote) upstreamName(exposed string) string {
	if r.cfg.Prefixed {
		return strings.TrimPrefix(exposed, r.cfg.Name+"_")
	}
	return exposed
}

func (r *remote) unexpose() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for name := range r.exposed {
		names = append(names, name)
	}
	r.exposed = map[string]*mcp.Tool{}
	if len(names) > 0 {
		r.s.server.RemoveTools(names...)
	}
}

// recordCheck keeps what was observed and writes the audit record of the
// check, and the observed pins for the host.
func (r *remote) recordCheck(ctx context.Context, snap mcppin.Server, changes []mcppin.Change, refused bool) {
	r.mu.Lock()
	r.observed, r.changes = &snap, changes
	r.mu.Unlock()
	r.s.writePins()
	rec := Record{Time: timestamp(time.Now()), Kind: KindPinCheck, Name: r.cfg.Name, Server: r.cfg.Name, OK: !refused,
		CorrelationID: traceIDFrom(ctx), SessionID: "connect",
		Arguments: mustMarshal(map[string]any{"url": r.cfg.URL, "on_drift": r.cfg.OnDrift, "tools": len(snap.Tools)})}
	switch {
	case r.cfg.Pin == nil:
		rec.ResultPreview = fmt.Sprintf("no pin yet: %d tool definitions recorded as observed", len(snap.Tools))
	case len(changes) == 0:
		rec.ResultPreview = fmt.Sprintf("%d tool definitions match the pin", len(snap.Tools))
	default:
		msg := fmt.Sprintf("tool definitions differ from the pin (on_drift = %q, %s): %s", r.cfg.OnDrift,
			map[bool]string{true: "server refused", false: "allowed with a warning"}[refused], (&DriftError{Changes: changes}).list())
		rec.Error, rec.ResultPreview = msg, msg
		r.s.log.Warn("mcp server drift", "server", r.cfg.Name, "on_drift", r.cfg.OnDrift, "refused", refused, "changes", len(changes))
	}
	r.s.audit.Write(rec)
}

func (e *DriftError) list() string {
	lines := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		lines[i] = c.String()
	}
	return strings.Join(lines, "; ")
}

// handler forwards a call of upstream tool name, after checking its
// URL-typed arguments against the server's own host.
func (r *remote) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := r.call(ctx, name, req.Params.Arguments)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}, nil
	}
}

func (r *remote) call(ctx context.Context, name string, raw json.RawMessage) (*mcp.CallToolResult, error) {
	if r.s.cfg.NoUpstream {
		return nil, ErrNoUpstream
	}
	args := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("%s: arguments are not a JSON object: %v", name, err)
		}
	}
	r.mu.Lock()
	def := r.exposed[r.exposedName(name)]
	r.mu.Unlock()
	if def == nil {
		return nil, fmt.Errorf("server %s no longer offers tool %s", r.cfg.Name, name)
	}
	if err := checkURLArgs(name, def.InputSchema, args, r.cfg.URL); err != nil {
		return nil, err
	}
	return r.up.call(withScope(ctx, r.cfg.Name, name), name, args)
}

// connectAll connects every declared server once, bounded by the upstream
// timeout each, so its tools are listed before the first client asks;
// a server that fails is retried in the background until ctx ends.
func (s *Sidecar) connectAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range s.remotes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.connect(ctx); err != nil {
				s.log.Warn("mcp server not available at start; retrying", "server", r.cfg.Name, "error", err)
				go r.retry(ctx)
			}
		}()
	}
	wg.Wait()
}

func (r *remote) connect(ctx context.Context) error {
	ctx, cancel := upstreamContext(withScope(withTraceID(ctx, newTraceID()), r.cfg.Name, ""), r.up.timeout)
	defer cancel()
	_, _, err := r.up.session(ctx)
	return err
}

// retry reconnects every few seconds until it succeeds, the server is
// refused for drift (nothing will change that in this run) or ctx ends.
func (r *remote) retry(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.connect(ctx)
		var drift *DriftError
		if err == nil || errors.As(err, &drift) {
			return
		}
	}
}

// claimTool gives exposed name to server unless someone holds it; it
// returns the holder.
func (s *Sidecar) claimTool(name, server string) string {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	if owner, ok := s.toolOwner[name]; ok {
		return owner
	}
	s.toolOwner[name] = server
	return server
}

// serverOf names the server a tool call goes to ("" for local tools).
func (s *Sidecar) serverOf(tool string) string {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	if o := s.toolOwner[tool]; o != localOwner {
		return o
	}
	return ""
}

// localOwner holds the local tools' names in toolOwner.
const localOwner = "the sidecar's local tools"

// Observed returns the pins of every declared server as last observed.
func (s *Sidecar) Observed() *mcppin.Lock {
	l := &mcppin.Lock{Schema: mcppin.Schema, Servers: []mcppin.Server{}}
	for _, r := range s.remotes {
		r.mu.Lock()
		if r.observed != nil {
			l.Put(*r.observed)
		}
		r.mu.Unlock()
	}
	return l
}

// writePins saves the observed pins to Config.PinsOut, for the host to
// write the lock after a first run and to show drift.
func (s *Sidecar) writePins() {
	if s.cfg.PinsOut == "" {
		return
	}
	s.pinsMu.Lock()
	defer s.pinsMu.Unlock()
	if err := s.Observed().Save(s.cfg.PinsOut); err != nil {
		s.log.Warn("writing observed tool pins", "error", err)
	}
}

// scopeKey carries the server and tool a request acts for.
type scopeKey struct{}

type scope struct{ server, tool string }

func withScope(ctx context.Context, server, tool string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope{server, tool})
}

// scopeHeader is the [egress.HeaderScope] value for ctx, "" without one.
func scopeHeader(ctx context.Context) string {
	sc, ok := ctx.Value(scopeKey{}).(scope)
	if !ok || sc.server == "" {
		return ""
	}
	v := "server=" + sc.server
	if sc.tool != "" {
		v += "; tool=" + sc.tool
	}
	return v
}

// localToolNames are the local tools' names, which no server may take.
var localToolNames = []string{ToolHTMLElementName}
