package sidecar

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
)

// ObserveOptions configure [ObservePin].
type ObserveOptions struct {
	// Header is added to every request (a server's credential, when the
	// host runs `mcp pin`; the sidecar never holds one).
	Header  http.Header
	Timeout time.Duration // default DefaultUpstreamTimeout
	// Proxy picks the proxy; nil: direct.
	Proxy func(*http.Request) (*url.URL, error)
	// Transport replaces the base transport (tests dial loopback fakes).
	Transport http.RoundTripper
	TLS       *tls.Config
}

// ObservePin connects to one server as the sidecar would (same size cap,
// no redirects), lists its tools and returns them pinned: the listed ones
// when sc.Tools is set, every one otherwise. A listed tool the server
// does not offer is an error: a pin must not record less than the spec
// asks for.
func ObservePin(ctx context.Context, sc ServerConfig, o ObserveOptions) (mcppin.Server, error) {
	s := &Sidecar{cfg: Config{UpstreamURL: sc.URL, UpstreamTimeout: o.Timeout, Proxy: o.Proxy, UpstreamTLS: o.TLS}}
	cfg, err := withDefaults(s.cfg)
	if err != nil {
		return mcppin.Server{}, err
	}
	s.cfg, s.log = cfg, cfg.Logger
	r := &remote{s: s, cfg: sc, exposed: map[string]*mcp.Tool{}}
	r.up = newUpstream(cfg, s.log)
	r.up.server = sc.Name
	if o.Transport != nil || o.Header != nil {
		base := o.Transport
		if base == nil {
			base = newBaseTransport(cfg)
		}
		r.up.http = &http.Client{Transport: &tracingTransport{base: &headerTransport{base: base, header: o.Header}, maxBytes: cfg.MaxUpstreamBytes}}
	}
	var snap mcppin.Server
	var problems map[string]error
	r.up.check = func(ctx context.Context, sess *mcp.ClientSession) (map[string]error, error) {
		tools, err := listTools(ctx, sess)
		if err != nil {
			return nil, fmt.Errorf("listing tools of server %s: %w", sc.Name, err)
		}
		snap, _, problems = r.snapshot(tools)
		return problems, nil
	}
	ctx, cancel := upstreamContext(withScope(ctx, sc.Name, ""), cfg.UpstreamTimeout)
	defer cancel()
	if _, _, err := r.up.session(ctx); err != nil {
		return mcppin.Server{}, r.up.explain(ctx, fmt.Errorf("connecting to server %s at %s: %w", sc.Name, sc.URL, err))
	}
	r.up.close()
	for _, name := range sc.Tools {
		if p := problems[name]; p != nil {
			return mcppin.Server{}, p
		}
	}
	return snap, nil
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.header) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range h.header {
			r.Header[k] = vs
		}
	}
	return h.base.RoundTrip(r)
}
