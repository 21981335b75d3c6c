package egress

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// The credential listener holds secrets at the boundary. The threat it
// answers: a workload that can read its own environment (a prompt
// injection is enough) can send a real API key anywhere the allowlist
// reaches, or print it into an answer. So the workload holds only a
// per-run placeholder; it sends its requests in origin form to the
// gateway's second port, naming the upstream in the first path segment:
//
//	POST http://egress-gateway:3129/api.openai.com/v1/chat/completions
//	Authorization: Bearer <placeholder>
//
// and the gateway, when the placeholder is the run's, replaces the header
// with the real credential of that host (and of no other) and forwards the
// request through the same checks as every other egress: name before
// lookup, every resolved address classified, the checked address dialed.

// CredentialPlaceholderToken is what [Credential.Format] holds where the
// value goes ("Bearer {value}").
const CredentialPlaceholderToken = "{value}"

// Credential is one secret the gateway adds on the way out, to one host.
type Credential struct {
	Host   string // normalised name (or IP literal) it may be sent to
	Port   uint16 // 0: the scheme's default
	Scheme string // "https" (verified TLS) or "http" (only when the user's base URL says so)
	Header string // the header it goes in (replaced, never appended)
	Format string // the header's value, with [CredentialPlaceholderToken] where the value goes
	Value  string // the secret; "" refuses every request for this host
	Source string // where the value came from (a host variable name), for logs and errors
}

// Injection configures the credential listener.
type Injection struct {
	Credentials []Credential
	// Placeholder is the run's stand-in for every credential's value; a
	// request must carry it, formatted like the credential, to be served.
	Placeholder string
	// RootCAs verifies upstream TLS; nil: the system roots.
	RootCAs *x509.CertPool
}

// Decision-line values of [Decision.Credential].
const (
	CredentialInjected = "injected"
	CredentialRefused  = "refused"
)

func (c Credential) port() uint16 {
	if c.Port != 0 {
		return c.Port
	}
	p, _ := strconv.ParseUint(defaultPort(c.Scheme), 10, 16)
	return uint16(p)
}

// authority is host:port as written in the listener's first path segment.
func (c Credential) authority() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.port())))
}

func (c Credential) format(v string) string {
	return strings.ReplaceAll(c.Format, CredentialPlaceholderToken, v)
}

// validate checks an injection before the gateway serves it: a
// credential that could never be matched, or be sent in clear by
// accident, is a configuration error.
func (in *Injection) validate() error {
	if len(in.Placeholder) < 16 {
		return errors.New("credential listener: the placeholder must be at least 16 characters")
	}
	seen := map[string]bool{}
	for i, c := range in.Credentials {
		h, err := netpolicy.NormalizeHost(c.Host)
		switch {
		case err != nil:
			return fmt.Errorf("credential %d: host: %w", i, err)
		case c.Scheme != "https" && c.Scheme != "http":
			return fmt.Errorf("credential %d (%s): scheme %q: want https or http", i, h, c.Scheme)
		case http.CanonicalHeaderKey(c.Header) == "" || strings.HasPrefix(http.CanonicalHeaderKey(c.Header), "Proxy-"):
			return fmt.Errorf("credential %d (%s): header %q cannot carry a credential", i, h, c.Header)
		case strings.Count(c.Format, CredentialPlaceholderToken) != 1:
			return fmt.Errorf("credential %d (%s): format %q must hold %s exactly once", i, h, c.Format, CredentialPlaceholderToken)
		}
		in.Credentials[i].Host = h
		a := in.Credentials[i].authority()
		if seen[a] {
			return fmt.Errorf("credential %d: a second credential for %s", i, a)
		}
		seen[a] = true
	}
	return nil
}

// newInjector builds the credential listener's proxy: like the forwarder,
// its upstream connections come from a pool (kept per client,
// credential, host, port and checked addresses; dialed only to the
// checked addresses, never through HTTP(S)_PROXY, TLS verified); it
// flushes every write at once, as model responses stream as server-sent
// events.
func (g *Gateway) newInjector(in *Injection) *http.Server {
	g.injectPool = newUpstreamPool(g, func(t *target) *http.Transport {
		tr := g.transportTemplate(t)
		tr.TLSClientConfig = &tls.Config{RootCAs: in.RootCAs, MinVersion: tls.VersionTLS12}
		tr.ForceAttemptHTTP2 = true
		return tr
	})
	ij := &injector{g: g, in: in, answers: newHeldSearch(credentialRefs(in.Credentials, nil)), others: map[*Credential]*heldSearch{}}
	for i := range in.Credentials {
		c := &in.Credentials[i]
		ij.others[c] = newHeldSearch(credentialRefs(in.Credentials, c))
	}
	ij.rp = &httputil.ReverseProxy{
		Rewrite:        rewriteInject,
		Transport:      g.injectPool,
		BufferPool:     responseBuffers,
		ErrorHandler:   g.forwardError,
		FlushInterval:  -1,
		ModifyResponse: ij.searchAnswer,
	}
	return &http.Server{
		Handler:           ij,
		MaxHeaderBytes:    g.limits.MaxHeaderBytes,
		ReadHeaderTimeout: g.limits.ReadHeaderTimeout,
		IdleTimeout:       g.limits.IdleTimeout,
		ErrorLog:          g.srv.ErrorLog,
		// As the proxy listener: no request is answered by net/http alone.
		DisableGeneralOptionsHandler: true,
	}
}

// injector serves the credential listener.
type injector struct {
	g  *Gateway
	in *Injection
	rp *httputil.ReverseProxy
	// answers searches every answer for every held value; others, per
	// credential, searches its requests for the other credentials'
	// values (held.go). Either is nil when there is nothing to search.
	answers *heldSearch
	others  map[*Credential]*heldSearch
}

// injectState is one request's route through the proxy's Rewrite.
type injectState struct {
	forwardState
	cred *Credential
	out  *url.URL
}

type injectKey struct{}

func (ij *injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ij.g.serveListener(w, r, nil, ij.serve)
}

// serve checks one request for the credential it names and forwards it
// with the credential, or refuses it.
func (ij *injector) serve(w http.ResponseWriter, r *http.Request, d *Decision) {
	st, dn := ij.check(r, d)
	if dn != nil {
		if st != nil && st.cred != nil {
			d.Credential = CredentialRefused
		}
		ij.g.refuse(w, d, dn)
		return
	}
	ij.forward(w, r, d, st)
}

// check finds the credential the request's first path segment names,
// checks the placeholder, and authorizes the upstream like any egress.
func (ij *injector) check(r *http.Request, d *Decision) (*injectState, *denial) {
	if r.Method == http.MethodConnect || r.URL.IsAbs() {
		return nil, deny(http.StatusBadRequest, "the credential listener takes origin-form requests: /HOST[:PORT]/path")
	}
	if !injectableMethod(r.Method) {
		return nil, deny(http.StatusMethodNotAllowed, "method %q is refused on the credential listener (GET, HEAD, POST, PUT, PATCH and DELETE only): a method such as TRACE makes the upstream echo the request, and with it the credential", truncate(r.Method, 32))
	}
	authority, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	d.Host = truncate(authority, 255)
	cred, dn := ij.credentialFor(authority, d)
	if dn != nil {
		return nil, dn
	}
	st := &injectState{cred: cred}
	if dn := ij.checkPlaceholder(r, cred); dn != nil {
		return st, dn
	}
	if up := upgradeRequested(r.Header); up != "" {
		return st, deny(http.StatusForbidden, "protocol upgrade %q is refused on the credential listener", truncate(up, 64))
	}
	if dn := carriedDenial(ij.others[cred], r, d); dn != nil {
		return st, dn
	}
	t, dn := ij.g.authorize(r.Context(), d, cred.Scheme == "https", cred.Host, strconv.Itoa(int(cred.port())))
	if dn != nil {
		return st, dn
	}
	st.target = t
	st.client = clientIP(r.RemoteAddr)
	st.forwardState.cred = credentialKey(cred)
	st.forwardState.answers = ij.answers
	st.out = &url.URL{Scheme: cred.Scheme, Host: urlHost(cred.Host, portIfNotDefault(cred)), RawQuery: r.URL.RawQuery}
	st.out.Path, _ = url.PathUnescape("/" + rest)
	st.out.RawPath = "/" + rest
	d.Path = loggedPath("/"+rest, r.URL.RawQuery)
	return st, nil
}

// injectableMethod reports whether a request with this method may carry an
// injected credential. The list is the methods an API client sends; the
// rest either echo the request back (TRACE, TRACK), open a tunnel
// (CONNECT) or are extensions no model or MCP API needs, and an echo would
// hand the credential to the sandbox.
func injectableMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func portIfNotDefault(c *Credential) string {
	if strconv.Itoa(int(c.port())) == defaultPort(c.Scheme) {
		return ""
	}
	return strconv.Itoa(int(c.port()))
}

// credentialFor is the credential declared for authority ("host" or
// "host:port"). Any other host is refused: a credential (and its
// placeholder) goes to the host it names and to no other.
func (ij *injector) credentialFor(authority string, d *Decision) (*Credential, *denial) {
	host, port := authority, ""
	if h, p, err := net.SplitHostPort(authority); err == nil {
		host, port = h, p
	}
	name, err := netpolicy.NormalizeHost(host)
	if err != nil {
		return nil, deny(http.StatusNotFound, "the path must start with the upstream host: /HOST[:PORT]/path (%v)", err)
	}
	d.Host = name
	for i := range ij.in.Credentials {
		c := &ij.in.Credentials[i]
		if c.Host == name && (port == "" || port == strconv.Itoa(int(c.port()))) {
			d.Port = c.port()
			return c, nil
		}
	}
	d.Port = portNumber(port)
	return nil, deny(http.StatusForbidden, "no credential is declared for %s: the run's placeholder is sent to no other host", truncate(authority, 255))
}

// checkPlaceholder accepts the request only when the credential's header
// carries exactly the run's placeholder, formatted like the credential.
// The comparison takes constant time: the threat is a workload guessing
// the placeholder byte by byte from response timings (worthless outside
// the run, but the only thing standing for the key inside it).
func (ij *injector) checkPlaceholder(r *http.Request, c *Credential) *denial {
	vs := r.Header.Values(c.Header)
	if len(vs) == 0 {
		return deny(http.StatusUnauthorized, "missing %s: the credential listener needs the run's placeholder", c.Header)
	}
	want := []byte(c.format(ij.in.Placeholder))
	if len(vs) != 1 || subtle.ConstantTimeCompare([]byte(vs[0]), want) != 1 {
		return deny(http.StatusForbidden, "%s does not carry the run's placeholder", c.Header)
	}
	if c.Value == "" {
		return deny(http.StatusForbidden, "the credential for %s has no value (%s is not set on the host)", c.Host, c.Source)
	}
	return nil
}

func (ij *injector) forward(w http.ResponseWriter, r *http.Request, d *Decision, st *injectState) {
	g := ij.g
	ctx := r.Context() // tied to the stop context at the entry (ServeHTTP)
	if g.full.Load() {
		refuseFull(w) // the log filled while this request was judged (full.go)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, g.limits.MaxDuration)
	defer cancel()
	ctx = context.WithValue(ctx, forwardKey{}, &st.forwardState)
	ctx = context.WithValue(ctx, injectKey{}, st)
	body := &countingReader{r: r.Body}
	r2 := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		r2.Body = g.searchBody(body, ij.others[st.cred], &st.forwardState)
	}
	cw := &countingWriter{ResponseWriter: w}
	d.Decision = Allow
	d.Credential = CredentialInjected
	d.Rule = joinRules(d.Rule, "credential:"+http.CanonicalHeaderKey(st.cred.Header)+"@"+st.cred.authority())
	defer g.finishForward(ctx, d, &st.forwardState, body, cw)
	ij.rp.ServeHTTP(cw, r2)
}

// rewriteInject sends the request to the credential's host with the real
// credential in its header (set, so a second value the client sent never
// reaches the upstream beside it) and without any Proxy-* header.
// ReverseProxy has already removed the hop-by-hop headers and those the
// Connection header lists.
func rewriteInject(pr *httputil.ProxyRequest) {
	st, _ := pr.In.Context().Value(injectKey{}).(*injectState)
	u := *st.out
	pr.Out.URL = &u
	pr.Out.Host = ""
	for k := range pr.Out.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Proxy-") {
			delete(pr.Out.Header, k)
		}
	}
	pr.Out.Header.Set(st.cred.Header, st.cred.format(st.cred.Value))
	// An answer is searched for held values as it streams: it must come
	// as the upstream wrote it, not compressed (searchAnswer), and whole:
	// a range of an echoed request hands the value over in pieces that
	// no search can recognise (red team, issue 27). No model or MCP API
	// needs either.
	pr.Out.Header.Set("Accept-Encoding", "identity")
	pr.Out.Header.Del("Range")
	pr.Out.Header.Del("If-Range")
}

// searchAnswer scrubs every held value from the answer's headers and, as
// it streams, from its body and trailers, before the client reads them
// (held.go): the threat is an upstream that reflects the injected
// credential back to the workload. An answer in an encoding the search
// cannot read (the upstream ignored "Accept-Encoding: identity") is
// refused.
func (ij *injector) searchAnswer(res *http.Response) error {
	st, _ := res.Request.Context().Value(injectKey{}).(*injectState)
	if st == nil || ij.answers == nil {
		return nil
	}
	if seen, ok := ij.answers.scrubHeader(res.Header, "answer header"); ok {
		st.noteReflected(seen)
	}
	if !identityEncoded(res.Header) {
		return errors.New("the answer is encoded (Content-Encoding), so it cannot be searched for held credential values: refused")
	}
	res.Body = &heldReader{r: res.Body, h: ij.answers, scrub: true, where: "answer body", seen: st.noteReflected,
		atEnd: func() {
			if seen, ok := ij.answers.scrubHeader(res.Trailer, "answer trailer"); ok {
				st.noteReflected(seen)
			}
		}}
	return nil
}

// ServeCredentials serves the credential listener on ln until
// [Gateway.Shutdown]; it then returns nil. It refuses to serve without an
// [Injection].
func (g *Gateway) ServeCredentials(ln net.Listener) error {
	if g.injectSrv == nil {
		return errors.New("credential listener: the gateway holds no credentials")
	}
	err := g.injectSrv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// carriesPlaceholder reports whether the URL or any header of r holds the
// run's placeholder. The proxy port refuses such a request: the
// placeholder goes to the credential listener, and to nowhere else. (A
// request body is not searched: it is streamed, not buffered.)
func (g *Gateway) carriesPlaceholder(r *http.Request) bool {
	if g.inject == nil {
		return false
	}
	if strings.Contains(r.URL.String(), g.inject.Placeholder) || strings.Contains(r.RequestURI, g.inject.Placeholder) {
		return true
	}
	if u, err := url.PathUnescape(r.RequestURI); err == nil && strings.Contains(u, g.inject.Placeholder) {
		return true
	}
	if u, err := url.QueryUnescape(r.URL.RawQuery); err == nil && strings.Contains(u, g.inject.Placeholder) {
		return true
	}
	h := r.Header
	for _, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, g.inject.Placeholder) {
				return true
			}
		}
	}
	return false
}

// identityEncoded reports whether every Content-Encoding of h (every
// header line, every comma-separated token) is empty or identity: a
// second header line must not slip a compressed body past the search
// (red team, issue 27).
func identityEncoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for _, tok := range strings.Split(v, ",") {
			if t := strings.TrimSpace(tok); t != "" && !strings.EqualFold(t, "identity") {
				return false
			}
		}
	}
	return true
}
