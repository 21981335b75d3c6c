package sidecar

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
)

// CredentialRoute sends a declared server's requests through the
// gateway's credential listener, which holds the server's real credential
// and swaps it for the run's placeholder on the way out (issue 15). The
// sidecar holds only the placeholder: the threat is a sidecar compromised
// through a tool's answer reading its own environment.
type CredentialRoute struct {
	// Listener is the credential listener's base URL,
	// "http://egress-gateway:3129".
	Listener string
	// Header and Value are what the sidecar sends: the credential's
	// header with the placeholder formatted in.
	Header, Value string
}

// credTransport rewrites each request to the credential listener's origin
// form: http://LISTENER/<host:port>/<path>, the placeholder in the
// credential's header and the scope in its header.
type credTransport struct {
	base  http.RoundTripper
	route CredentialRoute
	lis   *url.URL
}

func newCredTransport(base http.RoundTripper, route CredentialRoute) (*credTransport, error) {
	lis, err := url.Parse(route.Listener)
	if err != nil {
		return nil, err
	}
	return &credTransport{base: base, route: route, lis: lis}, nil
}

func (t *credTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	orig := req.URL
	r := req.Clone(req.Context())
	u := *t.lis
	u.Path = "/" + net.JoinHostPort(strings.ToLower(orig.Hostname()), effectivePort(orig)) + orig.EscapedPath()
	u.RawPath = ""
	u.RawQuery = orig.RawQuery
	r.URL, r.Host = &u, t.lis.Host
	r.Header.Set(t.route.Header, t.route.Value)
	if sc := scopeHeader(req.Context()); sc != "" {
		r.Header.Set(egress.HeaderScope, sc)
	}
	return t.base.RoundTrip(r)
}
