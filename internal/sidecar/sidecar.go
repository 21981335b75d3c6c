// Package sidecar is the MCP server the agent talks to: a streamable HTTP
// endpoint (stateless, so clients of every protocol revision interoperate)
// with a local tool and resource, three proxy tools for the Microsoft Learn
// MCP server reached through the egress gateway, and an audit log with one
// line per tools/call and resources/read, including refused ones.
//
// Surface: tool get_html_element_name returns "<table>" (the seed family's
// hard-coded element); resource mcp-sidecar://instructions/answer-format.md
// is the answer format; microsoft_docs_search, microsoft_docs_fetch and
// microsoft_code_sample_search carry the published schemas of package learn.
// GET /healthz answers 200 "ok".
//
// Upstream: one MCP client session, reused and re-established when the
// upstream drops it (one retry per call; the Learn tools are read-only). At
// each connect the tool list is checked against the published contract; a
// missing tool or a changed input schema (argument names, types, required
// set) disables that tool with a recorded error. microsoft_docs_fetch takes
// only https URLs on the upstream's host, default port, no credentials.
// Every upstream call is bounded by Config.UpstreamTimeout and its response
// by Config.MaxUpstreamBytes. No upstream request follows a redirect: a 3xx
// fails the call with a [RedirectError] naming the status and the Location
// host (the threat: re-sending the tool's arguments and the trace header to
// a host the sidecar was not configured with).
//
// Declared servers ([Config.Servers], the spec's [[mcp_servers]]) replace
// the built-in Learn upstream: each gets its own session with the same
// timeout, size cap and redirect refusal; at each connect its tool list is
// read, a listed tool it lacks is refused, and the definitions are compared
// with the pin (package mcppin): on drift the server is refused
// (on_drift = "fail") or served with a warning, and either way a
// "pin_check" audit line records it. Only the listed tools are exposed
// (under "<server>_" when prefixed); URL-typed arguments must point at the
// server's own scheme, host and port (urlargs.go). Every upstream request
// names its server and tool to the gateway in egress.HeaderScope, and every
// tools/call audit line names its server.
//
// Correlation: the trace-id of the caller's W3C traceparent (or a fresh one)
// is the call's correlation_id; it travels upstream as traceparent on every
// request and on the CONNECT to the gateway (keep-alives off, one tunnel
// per request), and in params._meta.traceparent.
//
// Audit (mcp-sidecar-tool-calls.jsonl, see [Record]): kinds "tools/call" and
// "resources/read", plus "invalid_request" for a body refused before its
// method could be read (unparsable or oversized). A tools/call writes a
// "call_start" line first, before anything is sent upstream, and its
// "tools/call" line when it ends; on shutdown the calls in flight are
// cancelled and their end lines say interrupted (inflight.go), so a start
// without an end means the process died mid-call. session_id is the id of
// the client's connection ("conn-…"): stateless MCP has no session of its
// own, and a client-chosen Mcp-Session-Id is not trusted. Limits: request body
// (Config.MaxBodyBytes), preview (500 characters, secrets redacted),
// concurrent client connections (Config.MaxSessions; over it, HTTP 503 with
// a JSON-RPC error).
//
// Environment: only [ProxyFromEnv] (HTTP_PROXY, HTTPS_PROXY, NO_PROXY and
// their lower-case forms) and [TuneGC] (GOGC) read it, once, when the role
// is configured.
// Everything else comes from [Config], filled by the CLI from flags.
//
// It must not touch the Docker engine, harden the process (the role's
// start-up in internal/cli does that) or write anywhere but its audit log.
package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/http/httpproxy"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/version"
)

// Defaults for [Config].
const (
	DefaultPort             = 8000
	DefaultUpstreamTimeout  = 30 * time.Second
	DefaultMaxSessions      = 128
	DefaultMaxBodyBytes     = 1 << 20  // 1 MiB: tool arguments are small
	DefaultMaxUpstreamBytes = 16 << 20 // 16 MiB: a full Learn page fits easily
	// MCPPath and HealthPath are the endpoints the sidecar serves.
	MCPPath    = "/mcp"
	HealthPath = "/healthz"
)

// Config is everything the sidecar needs. Zero fields take the defaults.
type Config struct {
	// UpstreamURL is the Learn MCP endpoint (default [learn.DefaultEndpoint]).
	UpstreamURL string
	// DocsHost is the only host microsoft_docs_fetch accepts; default: the
	// upstream URL's host.
	DocsHost        string
	UpstreamTimeout time.Duration
	// MaxSessions bounds concurrent client connections (0: default, <0: none).
	MaxSessions      int
	MaxBodyBytes     int64
	MaxUpstreamBytes int64
	// Proxy picks the proxy for upstream requests; nil means direct.
	Proxy func(*http.Request) (*url.URL, error)
	// UpstreamTLS overrides the TLS client config (tests trust a local CA).
	UpstreamTLS *tls.Config
	// Audit receives the records; nil turns auditing off.
	Audit *AuditLog
	// DisableLocalhostProtection turns off the SDK's DNS-rebinding guard.
	// Only tests that reach the sidecar through a loopback proxy need it.
	DisableLocalhostProtection bool
	// NoUpstream is the offline mode of doctor and test-sandbox runs: the
	// Learn proxy tools stay listed with their published schemas, but no
	// upstream session is ever attempted (no start-up check either) and a
	// call fails with [ErrNoUpstream]. The threat: even a refused connect
	// through the gateway makes it resolve the upstream's real name, and that
	// DNS query leaves the machine; those runs promise nothing does.
	NoUpstream bool
	// Logger gets operational messages (default: discard).
	Logger *slog.Logger
	// Servers are the declared upstream MCP servers (servers.go). Empty:
	// the built-in Learn upstream at UpstreamURL, as before.
	Servers []ServerConfig
	// ShutdownWait bounds how long shutdown waits, after cancelling the
	// calls in flight, for them to return (default [DefaultShutdownWait]);
	// a call still running then gets its interrupted end line anyway.
	ShutdownWait time.Duration
	// PinsOut, when set, is where the declared servers' tool definitions
	// as observed at connect are saved (an mcppin lock).
	PinsOut string
}

// learnServer is the built-in Learn upstream's name in scopes and audits.
const learnServer = "learn"

// ErrNoUpstream is the tool error of a proxy call in [Config.NoUpstream] mode.
var ErrNoUpstream = errors.New("no upstream in this run: the sidecar was started with --no-upstream (doctor/test-sandbox)")

// ProxyFromEnv returns the proxy function for the upstream client, read
// once from getenv: HTTP_PROXY/HTTPS_PROXY/NO_PROXY (or lower-case). It
// exists because http.ProxyFromEnvironment caches the environment the first
// time anything in the process uses it (the SDK does so at init), so it
// cannot be steered later; this reads the values explicitly.
func ProxyFromEnv(getenv func(string) string) func(*http.Request) (*url.URL, error) {
	either := func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return getenv(strings.ToLower(k))
	}
	pc := (&httpproxy.Config{
		HTTPProxy:  either("HTTP_PROXY"),
		HTTPSProxy: either("HTTPS_PROXY"),
		NoProxy:    either("NO_PROXY"),
	}).ProxyFunc()
	return func(r *http.Request) (*url.URL, error) { return pc(r.URL) }
}

// Sidecar is a configured MCP sidecar.
type Sidecar struct {
	cfg      Config
	log      *slog.Logger
	audit    *AuditLog
	docsHost string
	server   *mcp.Server
	up       *upstream
	handler  http.Handler
	pending  pendingCalls
	calls    inflightCalls
	conns    atomic.Int64

	remotes   []*remote
	toolsMu   sync.Mutex
	toolOwner map[string]string // exposed tool name -> server (localOwner for local tools)
	pinsMu    sync.Mutex
}

// New validates cfg and builds the sidecar.
func New(cfg Config) (*Sidecar, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	s := &Sidecar{cfg: cfg, log: cfg.Logger, audit: cfg.Audit, docsHost: cfg.DocsHost, toolOwner: map[string]string{}}
	s.up = newUpstream(cfg, s.log)
	instructions := "Read the resource " + AnswerFormatURI + " before composing a final answer; use the microsoft_* tools to find Microsoft Learn sources."
	if len(cfg.Servers) > 0 {
		instructions = "Read the resource " + AnswerFormatURI + " before composing a final answer."
	}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "mcpsidecar", Title: "mcpsidecar MCP sidecar", Version: version.String()},
		&mcp.ServerOptions{Instructions: instructions})
	addLocal(s.server)
	for _, n := range localToolNames {
		s.toolOwner[n] = localOwner
	}
	if len(cfg.Servers) == 0 {
		s.addProxyTools(s.server)
		for _, t := range learn.Tools() {
			s.toolOwner[t.Name] = learnServer
		}
	}
	for _, sc := range cfg.Servers {
		r, err := s.newRemote(sc)
		if err != nil {
			return nil, err
		}
		s.remotes = append(s.remotes, r)
	}
	s.server.AddReceivingMiddleware(s.auditMiddleware)
	s.handler = s.routes()
	return s, nil
}

func withDefaults(cfg Config) (Config, error) {
	if cfg.UpstreamURL == "" {
		cfg.UpstreamURL = learn.DefaultEndpoint
	}
	u, err := url.Parse(cfg.UpstreamURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return cfg, fmt.Errorf("upstream url %q: want an absolute http(s) URL", cfg.UpstreamURL)
	}
	if cfg.DocsHost == "" {
		cfg.DocsHost = u.Hostname()
	}
	cfg.DocsHost = strings.TrimSuffix(strings.ToLower(cfg.DocsHost), ".")
	if cfg.UpstreamTimeout < 0 || cfg.MaxBodyBytes < 0 || cfg.MaxUpstreamBytes < 0 {
		return cfg, errors.New("upstream timeout and byte limits must not be negative")
	}
	cfg.UpstreamTimeout = orDefault(cfg.UpstreamTimeout, DefaultUpstreamTimeout)
	cfg.MaxBodyBytes = orDefault(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.MaxUpstreamBytes = orDefault(cfg.MaxUpstreamBytes, DefaultMaxUpstreamBytes)
	cfg.MaxSessions = orDefault(cfg.MaxSessions, DefaultMaxSessions)
	if cfg.ShutdownWait < 0 {
		return cfg, errors.New("shutdown wait must not be negative")
	}
	cfg.ShutdownWait = orDefault(cfg.ShutdownWait, DefaultShutdownWait)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return cfg, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// MCPServer is the underlying SDK server (for in-memory transports).
func (s *Sidecar) MCPServer() *mcp.Server { return s.server }

// Handler serves /mcp and /healthz.
func (s *Sidecar) Handler() http.Handler { return s.handler }

func (s *Sidecar) routes() http.Handler {
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server },
		&mcp.StreamableHTTPOptions{
			Stateless:                  true, // required for mark3labs/mcp-go and 2026-07-28 clients
			JSONResponse:               true,
			MaxRequestBodyBytes:        s.cfg.MaxBodyBytes,
			DisableLocalhostProtection: s.cfg.DisableLocalhostProtection,
		})
	mux := http.NewServeMux()
	mux.Handle(MCPPath, s.front(mcpHandler))
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// CheckUpstream connects to the upstream and checks its tool list now,
// instead of at the first call. It returns the per-tool problems found.
func (s *Sidecar) CheckUpstream(ctx context.Context) (map[string]error, error) {
	if s.cfg.NoUpstream {
		return nil, ErrNoUpstream
	}
	ctx, cancel := upstreamContext(withScope(ctx, learnServer, ""), s.cfg.UpstreamTimeout)
	defer cancel()
	_, problems, err := s.up.session(ctx)
	if err != nil {
		return nil, s.up.explain(ctx, err)
	}
	return problems, nil
}

// Serve serves on ln until ctx is cancelled, then shuts down: it stops
// accepting, cancels the tools/calls in flight (their upstream requests
// are abandoned), waits up to Config.ShutdownWait for them to return with
// their end lines marked interrupted, writes that end line itself for any
// call still running, closes the upstream sessions and syncs the audit
// log. The threat: a call left running past the harness's stop grace
// would be killed with the process and leave a start line only; waiting
// for it to be answered could take the whole upstream timeout.
func (s *Sidecar) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext:       s.connContext,
		ConnState:         s.connState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	switch {
	case s.cfg.NoUpstream:
		s.log.Info("upstream disabled (--no-upstream): the Learn proxy tools answer with an error")
	case len(s.remotes) > 0:
		s.connectAll(ctx) // declared tools are listed before the first client asks
	default:
		go s.checkAtStart(ctx)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
		s.calls.stop()
		grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownWait)
		serveErr = srv.Shutdown(grace)
		cancel()
		if errors.Is(serveErr, context.DeadlineExceeded) {
			serveErr = nil // the calls still running are recorded next
			_ = srv.Close()
		}
	}
	if n := s.calls.abandon(s.audit, time.Now()); n > 0 {
		s.log.Warn("calls still running at shutdown recorded as interrupted", "calls", n)
	}
	s.up.close()
	for _, r := range s.remotes {
		r.up.close()
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	if serveErr != nil {
		serveErr = fmt.Errorf("serving MCP: %w", serveErr)
	}
	return errors.Join(serveErr, s.audit.Close())
}

// checkAtStart connects and checks the upstream's tools once at start. Its
// requests get their own trace-id, logged here, so the gateway lines they
// cause can be joined too.
func (s *Sidecar) checkAtStart(ctx context.Context) {
	corr := newTraceID()
	problems, err := s.CheckUpstream(withTraceID(ctx, corr))
	if err != nil {
		s.log.Warn("upstream not reachable at start; will retry on the first call", "upstream", s.cfg.UpstreamURL, "correlation_id", corr, "error", err)
		return
	}
	s.log.Info("upstream checked", "upstream", s.cfg.UpstreamURL, "correlation_id", corr, "disabled_tools", len(problems))
}
