package sidecar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/version"
)

// errUpstreamTooLarge is returned when an upstream response exceeds the cap.
var errUpstreamTooLarge = errors.New("upstream response too large")

// upstream holds the one MCP client session to the Learn server. The session
// is reused across calls and re-established when the upstream drops it; the
// tool list is checked against the published contract at each (re)connect.
type upstream struct {
	endpoint string
	timeout  time.Duration
	http     *http.Client
	log      *slog.Logger
	// server names the server in the scope of every request (the
	// gateway checks it); check, when set, replaces the Learn contract
	// check at connect (declared servers, servers.go).
	server string
	check  func(ctx context.Context, sess *mcp.ClientSession) (map[string]error, error)

	mu       sync.Mutex
	sess     *mcp.ClientSession
	problems map[string]error // per published tool, from the last tools/list
}

func newUpstream(cfg Config, log *slog.Logger) *upstream {
	return &upstream{
		endpoint: cfg.UpstreamURL,
		server:   learnServer,
		timeout:  cfg.UpstreamTimeout,
		http:     &http.Client{Transport: newUpstreamTransport(cfg)},
		log:      log,
	}
}

// newUpstreamTransport builds the HTTP transport to the upstream. The proxy
// function comes from the role's config (read once from the environment, see
// [ProxyFromEnv]). Keep-alives are off so every upstream request opens its
// own connection (its own CONNECT tunnel through the gateway), carrying the
// call's traceparent: the gateway's decision line for that tunnel can then be
// joined to exactly one audited call.
func newUpstreamTransport(cfg Config) http.RoundTripper {
	return &tracingTransport{base: newBaseTransport(cfg), maxBytes: cfg.MaxUpstreamBytes}
}

// newBaseTransport is the upstream's HTTP transport under the tracing one.
func newBaseTransport(cfg Config) *http.Transport {
	return &http.Transport{
		Proxy:                 cfg.Proxy,
		GetProxyConnectHeader: proxyConnectHeader,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:       cloneTLS(cfg.UpstreamTLS),
		TLSHandshakeTimeout:   10 * time.Second,
		DisableKeepAlives:     true,
	}
}

func cloneTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	return c.Clone()
}

func proxyConnectHeader(ctx context.Context, _ *url.URL, _ string) (http.Header, error) {
	h := http.Header{}
	if id := traceIDFrom(ctx); id != "" {
		h.Set(HeaderTraceparent, traceparent(id))
	}
	if sc := scopeHeader(ctx); sc != "" {
		h.Set(egress.HeaderScope, sc)
	}
	return h, nil
}

// RedirectError is the error of an upstream exchange answered with a
// redirect (HTTP 3xx). The sidecar follows none: an MCP client has no reason
// to, and following one would re-send the tool's arguments and the call's
// traceparent to a host the sidecar was never configured to talk to.
type RedirectError struct {
	Status   int
	Location string // host of the Location header (resolved), "" without one
}

func (e *RedirectError) Error() string {
	to := "no Location header"
	if e.Location != "" {
		to = "Location host " + e.Location
	}
	return fmt.Sprintf("upstream answered HTTP %d, a redirect (%s); the sidecar follows no redirects", e.Status, to)
}

// tracingTransport stamps the call's traceparent on every upstream request,
// refuses redirects and caps the response body, so a malicious upstream
// cannot exhaust memory. It is the only transport of the upstream client, so
// every upstream request (session start, calls, reconnects, the DELETE that
// ends a session) passes through it.
type tracingTransport struct {
	base     http.RoundTripper
	maxBytes int64
}

func (t *tracingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if id := traceIDFrom(req.Context()); id != "" {
		req = req.Clone(req.Context())
		req.Header.Set(HeaderTraceparent, traceparent(id))
	}
	if sc := scopeHeader(req.Context()); sc != "" && req.URL.Scheme == "http" {
		// A plain-HTTP request goes to the gateway as is: the scope
		// rides on it (a Proxy-* header, which the gateway strips).
		req = req.Clone(req.Context())
		req.Header.Set(egress.HeaderScope, sc)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Refused here rather than in the client's CheckRedirect, so no
		// client built on this transport can follow one.
		resp.Body.Close()
		return nil, redirectError(resp)
	}
	if t.maxBytes <= 0 {
		return resp, nil
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.maxBytes, max: t.maxBytes}
	return resp, nil
}

func redirectError(resp *http.Response) *RedirectError {
	e := &RedirectError{Status: resp.StatusCode}
	if loc, err := resp.Location(); err == nil {
		e.Location = loc.Host
	}
	return e
}

type cappedBody struct {
	rc        io.ReadCloser
	left, max int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%w: more than %d bytes", errUpstreamTooLarge, b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// correlate is the upstream client's sending middleware: it copies the
// call's correlation id into the request's _meta as a traceparent (the MCP
// convention for trace context), next to the HTTP header the transport sets.
func correlate(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		id := traceIDFrom(ctx)
		if p, ok := req.GetParams().(*mcp.CallToolParams); ok && id != "" {
			meta := p.GetMeta()
			if meta == nil {
				meta = map[string]any{}
			}
			meta["traceparent"] = traceparent(id)
			p.SetMeta(meta)
		}
		return next(ctx, method, req)
	}
}

// call runs tool name upstream with args, within the upstream timeout.
func (u *upstream) call(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := upstreamContext(withScope(ctx, u.server, name), u.timeout)
	defer cancel()
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		sess, problems, err := u.session(ctx)
		if err != nil {
			return nil, u.explain(ctx, fmt.Errorf("connecting to upstream %s: %w", u.endpoint, err))
		}
		if p := problems[name]; p != nil {
			return nil, p
		}
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err == nil {
			return res, nil
		}
		lastErr = fmt.Errorf("calling upstream tool %s: %w", name, err)
		var rpcErr *jsonrpc.Error
		var redirect *RedirectError
		if ctx.Err() != nil || errors.As(err, &rpcErr) || errors.As(err, &redirect) {
			break // the session is fine, or retrying cannot help
		}
		if strings.Contains(err.Error(), errUpstreamTooLarge.Error()) {
			u.drop(sess) // the stream was cut; the same answer would be cut again
			break
		}
		// The transport failed: the upstream dropped the session or the
		// connection. Start a fresh session and try once more (the Learn
		// tools are read-only, so a repeat is harmless).
		u.drop(sess)
	}
	return nil, u.explain(ctx, lastErr)
}

// upstreamContext derives the context of an upstream exchange from the
// caller's: it keeps the caller's cancellation and correlation id and
// nothing else, bounded by timeout. The SDK's server and client share
// context keys (the server stores the caller's negotiated protocol version
// under one), so passing the server-side context down would make the
// upstream client speak the agent's protocol version to the upstream.
func upstreamContext(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	base := withTraceID(context.Background(), traceIDFrom(parent))
	if sc, ok := parent.Value(scopeKey{}).(scope); ok {
		base = withScope(base, sc.server, sc.tool)
	}
	ctx, cancel := context.WithTimeout(base, timeout)
	stop := context.AfterFunc(parent, cancel)
	return ctx, func() { stop(); cancel() }
}

// explain turns a deadline into a message that names the timeout.
func (u *upstream) explain(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("upstream %s did not answer within %s: %w", u.endpoint, u.timeout, err)
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) || strings.Contains(err.Error(), "certificate signed by unknown authority") {
		return fmt.Errorf("%w; the upstream's certificate is signed by an authority the sandbox does not trust: behind a TLS-inspecting proxy or with a private CA, set %s on the host to a PEM bundle that includes it", err, envCABundle)
	}
	return err
}

// envCABundle is the host variable naming the CA bundle the image trusts
// (read by the host); the sidecar only names it.
const envCABundle = spec.EnvCABundle

// session returns the live session, connecting and checking the tool list
// first if there is none.
func (u *upstream) session(ctx context.Context) (*mcp.ClientSession, map[string]error, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != nil {
		return u.sess, u.problems, nil
	}
	tr := &mcp.StreamableClientTransport{Endpoint: u.endpoint, HTTPClient: u.http, DisableStandaloneSSE: true, MaxRetries: -1}
	// A fresh client per session: a go-sdk client remembers what it
	// negotiated, and a restarted upstream must be negotiated from scratch.
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpsidecar", Version: version.String()}, nil)
	client.AddSendingMiddleware(correlate)
	sess, err := client.Connect(ctx, tr, nil)
	if err != nil {
		return nil, nil, err
	}
	check := u.checkTools
	if u.check != nil {
		check = u.check
	}
	problems, err := check(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return nil, nil, err
	}
	u.sess, u.problems = sess, problems
	return sess, problems, nil
}

// drop forgets sess (if it is still the live one) so the next call reconnects.
func (u *upstream) drop(sess *mcp.ClientSession) {
	u.mu.Lock()
	if u.sess == sess {
		u.sess, u.problems = nil, nil
	}
	u.mu.Unlock()
	go sess.Close() // may block on a dead peer; never hold up the caller
}

func (u *upstream) close() {
	u.mu.Lock()
	sess := u.sess
	u.sess = nil
	u.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
}

// checkTools lists the upstream's tools and compares each published tool
// with what the upstream advertises. A missing tool or a changed input
// schema becomes a per-tool error returned to every call of that tool: the
// sidecar refuses to guess how to call a tool whose contract moved.
func (u *upstream) checkTools(ctx context.Context, sess *mcp.ClientSession) (map[string]error, error) {
	res, err := sess.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing upstream tools: %w", err)
	}
	got := make(map[string]*mcp.Tool, len(res.Tools))
	for _, t := range res.Tools {
		got[t.Name] = t
	}
	problems := map[string]error{}
	for _, want := range learn.Tools() {
		if p := checkTool(u.endpoint, want, got[want.Name]); p != nil {
			problems[want.Name] = p
			u.log.Warn("upstream tool disabled", "tool", want.Name, "reason", p.Error())
		}
	}
	return problems, nil
}

func checkTool(endpoint string, want learn.Tool, got *mcp.Tool) error {
	if got == nil {
		return fmt.Errorf("upstream %s does not offer tool %s (checked at connect); refusing to call it", endpoint, want.Name)
	}
	var schema map[string]any
	b, err := json.Marshal(got.InputSchema)
	if err == nil {
		err = json.Unmarshal(b, &schema)
	}
	if err != nil {
		return fmt.Errorf("upstream %s: reading input schema of %s: %w", endpoint, want.Name, err)
	}
	if err := want.CheckSchema(schema); err != nil {
		return fmt.Errorf("upstream %s changed a tool contract, refusing to call it: %w", endpoint, err)
	}
	return nil
}
