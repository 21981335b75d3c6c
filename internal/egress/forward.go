package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// forwardState carries one forwarded request's checked target (and what
// its pool key needs) into the upstream pool, and the outcome back.
type forwardState struct {
	target *target
	client string // the client's IP address
	cred   string // the credential listener's credential, for its pool key
	dialed netip.Addr
	err    error
	// bodyErr is the first error reading the upstream's answer body
	// other than its end (pool.go).
	bodyErr error
	// carried and reflected are where a held value was seen in the
	// request (which was then cut off) or in the answer (scrubbed).
	carried, reflected *heldSeen
	// answers searches what goes back to the client for held values (the
	// credential listener's; nil on the proxy port).
	answers *heldSearch
}

// scrubError is err with every held value scrubbed from its text (the
// credential listener's answers search, else h): the transport's and the
// gateway's own errors quote what the upstream sent (a malformed status
// line, a header value), and the error goes to the client and the
// decision line (red team, issue 27). A value found is noted reflected.
func (st *forwardState) scrubError(err error, h *heldSearch) error {
	if st.answers != nil {
		h = st.answers
	}
	if err == nil || h == nil {
		return err
	}
	b := []byte(err.Error())
	n, ok := h.scrub(b)
	if !ok {
		return err
	}
	st.noteReflected(heldSeen{where: "upstream data quoted in the gateway's error", source: n.source, form: n.form})
	return errors.New(string(b))
}

func (st *forwardState) noteCarried(s heldSeen) {
	if st.carried == nil {
		st.carried = &s
	}
}

func (st *forwardState) noteReflected(s heldSeen) {
	if st.reflected == nil {
		st.reflected = &s
	}
}

type forwardKey struct{}

// newForwarder builds the plain-HTTP forwarder: a ReverseProxy whose
// upstream connections come from the gateway's pool (kept per client,
// host, port and checked addresses; dialed only to the checked
// addresses, never through HTTP(S)_PROXY, TLS verified for https
// absolute URIs).
func (g *Gateway) newForwarder() http.Handler {
	g.fwdPool = newUpstreamPool(g, g.transportTemplate)
	return &httputil.ReverseProxy{
		Rewrite:      rewriteForward,
		Transport:    g.fwdPool,
		BufferPool:   responseBuffers,
		ErrorHandler: g.forwardError,
		ErrorLog:     nil,
	}
}

// rewriteForward sends the request on to the checked target, minus every
// Proxy-* header: the threat is proxy credentials (Proxy-Authorization)
// leaking to an upstream. The URL's host is replaced by the normalised
// name the policy matched, so that the name checked is exactly the name
// sent as Host and as TLS server name (and logged): a client's full-width
// or ideographic-dot spelling would otherwise reach the upstream in
// whatever form the transport's own IDNA conversion makes of it.
// Hop-by-hop headers, and those the Connection header lists, are removed
// by ReverseProxy.
func rewriteForward(pr *httputil.ProxyRequest) {
	u := *pr.In.URL
	if st, _ := pr.In.Context().Value(forwardKey{}).(*forwardState); st != nil && st.target != nil {
		u.Host = urlHost(st.target.host, u.Port())
	}
	pr.Out.URL = &u
	pr.Out.Host = ""
	for k := range pr.Out.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Proxy-") {
			delete(pr.Out.Header, k)
		}
	}
}

// urlHost is host (bracketed when IPv6) with port when the client wrote
// one.
func urlHost(host, port string) string {
	if port != "" {
		return net.JoinHostPort(host, port)
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

func (g *Gateway) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	if st, _ := r.Context().Value(forwardKey{}).(*forwardState); st != nil {
		err = st.scrubError(err, g.held)
		st.err = err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "mcpsidecar egress gateway: upstream: %v\n", err)
}

// serveForward handles an absolute-URI request (http:// or https://).
func (g *Gateway) serveForward(w http.ResponseWriter, r *http.Request, d *Decision) {
	t, dn := g.checkForward(r, d)
	if dn != nil {
		g.refuse(w, d, dn)
		return
	}
	st := &forwardState{target: t, client: clientIP(r.RemoteAddr)}
	ctx := r.Context() // tied to the stop context at the entry (ServeHTTP)
	if g.full.Load() {
		refuseFull(w) // the log filled while this request was judged (full.go)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, forwardKey{}, st), g.limits.MaxDuration)
	defer cancel()
	body := &countingReader{r: r.Body}
	r2 := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		r2.Body = g.searchBody(body, g.held, st)
	}
	cw := &countingWriter{ResponseWriter: w}
	if mustClose(r) {
		w.Header().Set("Connection", "close")
	}
	d.Decision = Allow
	defer g.finishForward(ctx, d, st, body, cw)
	g.fwd.ServeHTTP(cw, r2)
}

// finishForward writes the decision line of a forwarded request when its
// handler ends, however it ends. ReverseProxy panics with
// [http.ErrAbortHandler] when it cannot copy the answer to its end (the
// client went away, the upstream sent less than its Content-Length or
// reset, the gateway shut down): the line is written then too, saying
// the answer was cut off, and the panic goes on to net/http, which closes
// the client's connection. The threat: a workload that reads the answer's
// headers and hangs up, and so reaches the upstream (with an injected
// credential, on the credential listener) with no line (issue 26).
func (g *Gateway) finishForward(ctx context.Context, d *Decision, st *forwardState, up *countingReader, down *countingWriter) {
	p := recover()
	if st.dialed.IsValid() {
		d.ResolvedIP = st.dialed.String()
	}
	d.BytesUp, d.BytesDown = up.n.Load(), down.n.Load()
	d.Error = forwardErr(ctx, st.err)
	if p != nil && st.err == nil {
		d.Error = cutOffError(ctx, st, down)
	}
	if d.Error != "" {
		d.Error = st.scrubError(errors.New(d.Error), g.held).Error()
	}
	switch {
	case st.carried != nil:
		d.Decision, d.Credential, d.HeldValue = Deny, CredentialCarried, st.carried.String()
		d.Reason = "the request carries a held credential value, to a host that is not the value's own: cut off before the value was sent"
		d.Error = ""
	case st.reflected != nil:
		d.Credential, d.HeldValue = CredentialReflected, st.reflected.String()+", scrubbed before the client read it"
	}
	g.record(d)
	if p != nil {
		panic(p)
	}
}

// cutOffError says why an answer did not reach the client whole.
func cutOffError(ctx context.Context, st *forwardState, down *countingWriter) string {
	why := "the client closed its connection"
	switch {
	case errors.Is(context.Cause(ctx), errStopped):
		return interruptedError(st.bodyErr)
	case errors.Is(context.Cause(ctx), ErrLogFull):
		why = "the decision log filled"
	case st.bodyErr != nil && !errors.Is(st.bodyErr, context.Canceled):
		why = "reading the upstream's answer: " + st.bodyErr.Error()
	case down.err != nil:
		why = "writing to the client: " + down.err.Error()
	}
	return ErrorInterrupted + ": the answer was cut off after " + strconv.FormatInt(down.n.Load(), 10) + " bytes: " + why
}

// forwardErr is the decision line's error of a forwarded request: marked
// interrupted when the gateway's shutdown cancelled it, or when the
// client went away before the answer came (its request's context ended).
func forwardErr(ctx context.Context, err error) string {
	switch {
	case errors.Is(context.Cause(ctx), errStopped):
		return interruptedError(err)
	case err != nil && errors.Is(err, context.Canceled):
		return ErrorInterrupted + ": the client closed its connection before the answer came (" + err.Error() + ")"
	case err != nil:
		return err.Error()
	}
	return ""
}

// checkForward validates an absolute-URI request and authorizes its
// target.
func (g *Gateway) checkForward(r *http.Request, d *Decision) (*target, *denial) {
	u := r.URL
	d.Host = truncate(u.Hostname(), 255)
	d.Path = loggedPath(u.EscapedPath(), u.RawQuery)
	if u.User != nil {
		return nil, deny(http.StatusForbidden, "user information in the URL is refused")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, deny(http.StatusForbidden, "scheme %q is not proxied (http and https only)", truncate(u.Scheme, 32))
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	d.Port = portNumber(port)
	if dn := checkHostHeader(r, u.Hostname(), port, false); dn != nil {
		return nil, dn
	}
	t, dn := g.authorize(r.Context(), d, false, u.Hostname(), port)
	if dn != nil {
		return nil, dn
	}
	if g.carriesPlaceholder(r) {
		return nil, deny(http.StatusForbidden, "the request carries the run's credential placeholder, which is sent only to the credential listener and from there only to the credential's own host")
	}
	if dn := carriedDenial(g.held, r, d); dn != nil {
		return nil, dn
	}
	if r.Method == http.MethodTrace || r.Method == "TRACK" {
		return nil, deny(http.StatusMethodNotAllowed, "method %s is refused: it makes the upstream echo the request back", r.Method)
	}
	if up := upgradeRequested(r.Header); up != "" {
		return nil, deny(http.StatusForbidden, "protocol upgrade %q is refused: an upgraded connection is a raw two-way tunnel, which plain HTTP must not open (use CONNECT to an allowed port)", truncate(up, 64))
	}
	return t, nil
}

// upgradeRequested names the protocol upgrade r asks for ("websocket",
// "h2c", or "upgrade" for a bare "Connection: upgrade"), or "". The threat
// is a plain-HTTP request to an allowed host on port 80 turning into an
// opaque tunnel (101 Switching Protocols) that the CONNECT-port rule
// exists to prevent, and whose bytes the decision line would not count.
func upgradeRequested(h http.Header) string {
	if v := h.Values("Upgrade"); len(v) > 0 {
		return strings.Join(v, ", ")
	}
	for _, v := range h.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return "upgrade"
			}
		}
	}
	return ""
}

// checkHostHeader refuses a request whose Host header names another
// destination than its target (domain fronting). For CONNECT a Host header
// without a port is accepted, as clients differ there; for an absolute URI
// a missing port means the scheme's default.
func checkHostHeader(r *http.Request, host, port string, connect bool) *denial {
	hosts, ok := rawHostHeaders(r)
	if !ok {
		return deny(http.StatusBadRequest, "request headers could not be read back to check the Host header")
	}
	switch {
	case len(hosts) == 0:
		return nil
	case len(hosts) > 1:
		return deny(http.StatusBadRequest, "request has %d Host headers", len(hosts))
	}
	hh, hp := hosts[0], ""
	if h, p, err := net.SplitHostPort(hh); err == nil {
		hh, hp = h, p
	} else if strings.HasPrefix(hh, "[") && strings.HasSuffix(hh, "]") {
		hh = hh[1 : len(hh)-1]
	}
	if hp == "" && !connect {
		hp = port
	}
	want, err := netpolicy.NormalizeHost(host)
	if err != nil {
		return nil // the target itself is refused next, with its own reason
	}
	got, err := netpolicy.NormalizeHost(hh)
	if err != nil || got != want || (hp != "" && hp != port) {
		return deny(http.StatusForbidden, "Host header %q disagrees with the request target %s", truncate(hosts[0], 255), net.JoinHostPort(host, port))
	}
	return nil
}

type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

type countingWriter struct {
	http.ResponseWriter
	n   atomic.Int64
	err error // the first write error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// Unwrap lets http.ResponseController reach Flush on the real writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// portNumber is port as a number for the decision line, 0 when invalid.
func portNumber(s string) uint16 {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(p)
}

// RedactedValue stands for every query value in a decision line's path.
const RedactedValue = "REDACTED"

// loggedPath is a decision line's path: the escaped path and the query's
// keys, every value replaced by [RedactedValue] (a query is where tokens
// and search terms travel), bounded in length.
func loggedPath(path, rawQuery string) string {
	if rawQuery != "" {
		parts := strings.Split(rawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=" + RedactedValue
			}
		}
		path += "?" + strings.Join(parts, "&")
	}
	return truncate(path, 1024)
}

// searchBody wraps a request body so that a held value in it cuts the
// request off before the value is sent (held.go); body itself when h is
// nil.
func (g *Gateway) searchBody(body io.ReadCloser, h *heldSearch, st *forwardState) io.ReadCloser {
	if h == nil {
		return body
	}
	return &heldReader{r: body, h: h, where: "request body", seen: st.noteCarried}
}

// carriedDenial refuses a request whose request line or headers carry a
// value of h, noting where on d.
func carriedDenial(h *heldSearch, r *http.Request, d *Decision) *denial {
	if h == nil {
		return nil
	}
	seen, ok := h.carriedInRequest(r)
	if !ok {
		return nil
	}
	d.Credential, d.HeldValue = CredentialCarried, seen.String()
	return deny(http.StatusForbidden, "the request carries a held credential value (%s), to a host that is not the value's own: refused", seen.where)
}
