package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Upstream connections are kept and reused, but only ever for requests
// that passed the same checks to the same place for the same client. The
// threat a shared pool poses: a connection opened to the address checked
// for one name (or for one client) carrying a request for another name,
// another address (after the name's answer changed), or another client,
// which the request's own check never judged. So the pool is keyed by
// everything the check decided: the client's address, scheme, the
// normalised host, port, the exact set of checked addresses, and for the
// credential listener the credential. Every request is still checked in
// full (allowlist before lookup, every answer classified) before the pool
// is consulted; a changed answer is a new key, so a new connection. Each
// key has its own http.Transport, whose dialer dials only that key's
// checked addresses (through the socket-level check).

const (
	// poolIdleTimeout closes an upstream connection idle this long, and
	// forgets a key unused this long.
	poolIdleTimeout = 30 * time.Second
	// poolIdlePerKey bounds the idle connections kept for one key.
	poolIdlePerKey = 32
	// poolMaxKeys bounds the keys remembered; the least recently used
	// goes first.
	poolMaxKeys = 256
)

// poolKey is what a kept connection may be reused for.
type poolKey struct {
	client string // the client's IP address
	scheme string
	host   string // normalised name or IP literal
	port   uint16
	addrs  string // the checked addresses, in dial order
	cred   string // the credential listener's credential; "" on the proxy port
}

type poolEntry struct {
	tr       *http.Transport
	lastUsed time.Time // under upstreamPool.mu
}

var errNoTarget = errors.New("forwarding without a checked target")

// upstreamPool is the forwarder's and the credential listener's
// RoundTripper: it routes each request to its key's transport.
type upstreamPool struct {
	g       *Gateway
	newTr   func(t *target) *http.Transport
	mu      sync.Mutex
	entries map[poolKey]*poolEntry
	closed  bool
}

func newUpstreamPool(g *Gateway, newTr func(t *target) *http.Transport) *upstreamPool {
	return &upstreamPool{g: g, newTr: newTr, entries: map[poolKey]*poolEntry{}}
}

// transportTemplate is what every kept-connection transport shares: no
// proxy from the environment, only the given dialer, TLS verified.
func (g *Gateway) transportTemplate(t *target) *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, _, err := g.dialTarget(ctx, t)
			return c, err
		},
		TLSHandshakeTimeout:    g.limits.DialTimeout,
		MaxResponseHeaderBytes: 1 << 20,
		MaxIdleConns:           poolIdlePerKey,
		MaxIdleConnsPerHost:    poolIdlePerKey,
		IdleConnTimeout:        poolIdleTimeout,
	}
}

// RoundTrip sends req on a connection of its key, kept or new, and notes
// the address it went to for the decision line.
func (p *upstreamPool) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(forwardKey{}).(*forwardState)
	if st == nil || st.target == nil {
		return nil, errNoTarget
	}
	if p.g.full.Load() {
		return nil, ErrLogFull // the last check before a byte goes upstream (full.go)
	}
	tr := p.transport(st.key(req.URL.Scheme), st.target)
	ctx, cancel := context.WithCancelCause(req.Context()) // ends with the request's context at the latest
	var attempts, wrote atomic.Int32
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if ap, err := netip.ParseAddrPort(info.Conn.RemoteAddr().String()); err == nil {
				st.dialed = ap.Addr().Unmap()
			}
		},
		// The transport retries a replayable request by itself (HTTP/1:
		// a kept connection closed after the request was read; HTTP/2: a
		// refused stream), unseen by the handler: one decision line, many
		// deliveries of the request and its credential (red team, issue
		// 26). A retry is allowed only while nothing was written upstream.
		GetConn: func(string) {
			if attempts.Add(1) > 1 && wrote.Load() > 0 {
				cancel(errRetryRefused)
			}
		},
		WroteHeaders: func() { wrote.Add(1) },
		// ReverseProxy passes an informational (1xx) answer's headers on
		// through a hook of its own, which runs after this one and never
		// reaches ModifyResponse: they are scrubbed here, in place (red
		// team, issue 27).
		Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
			if st.answers != nil {
				if seen, ok := st.answers.scrubHeader(http.Header(h), "informational answer header"); ok {
					st.noteReflected(seen)
				}
			}
			return nil
		},
	}
	out := req.WithContext(httptrace.WithClientTrace(ctx, trace))
	if out.Body == nil || out.Body == http.NoBody {
		// A request with no body is one the transport deems replayable
		// and re-sends by itself when a kept connection fails after it
		// was written; an empty body of our own makes it not replayable
		// (it goes out with no body all the same), so the transport
		// retries only what it never wrote. The trace above is the
		// second guard.
		out.Body, out.GetBody = noBody{}, nil
	}
	resp, err := tr.RoundTrip(out)
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), errRetryRefused):
		err = errRetryRefused
	case wrote.Load() > 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		err = fmt.Errorf("%w (%v)", errRetryRefused, err)
	}
	if !st.dialed.IsValid() {
		st.dialed = st.target.addrs[0]
	}
	if resp != nil {
		resp.Body = &watchedBody{ReadCloser: resp.Body, st: st}
	}
	return resp, err
}

// errRetryRefused is the error of a request the upstream received and then
// failed without an answer: the gateway does not send it again.
var errRetryRefused = errors.New("the upstream took the request and answered nothing; it is not sent again (one request, one delivery)")

// watchedBody notes in the request's state the first error reading the
// upstream's answer other than its end: ReverseProxy does not return it,
// and the decision line says why an answer was cut off.
type watchedBody struct {
	io.ReadCloser
	st *forwardState
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.st.bodyErr == nil {
		b.st.bodyErr = err
	}
	return n, err
}

// key is the pool key of st's request.
func (st *forwardState) key(scheme string) poolKey {
	var b strings.Builder
	for i, a := range st.target.addrs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a.String())
	}
	return poolKey{client: st.client, scheme: scheme, host: st.target.host, port: st.target.port, addrs: b.String(), cred: st.cred}
}

// transport is key's transport, made on first use. Its dialer dials the
// target checked for the request that made it; every later request of
// the key was checked to exactly the same addresses.
func (p *upstreamPool) transport(k poolKey, t *target) *http.Transport {
	now := p.g.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[k]; e != nil {
		e.lastUsed = now
		return e.tr
	}
	tc := *t
	tc.addrs = append([]netip.Addr(nil), t.addrs...)
	tr := p.newTr(&tc)
	if p.closed {
		tr.DisableKeepAlives = true
		return tr
	}
	if len(p.entries) >= poolMaxKeys {
		p.evictLocked(now)
	}
	p.entries[k] = &poolEntry{tr: tr, lastUsed: now}
	return tr
}

// evictLocked forgets keys unused for poolIdleTimeout, or else the least
// recently used one. Requests in flight on a forgotten transport finish;
// its idle connections are closed.
func (p *upstreamPool) evictLocked(now time.Time) {
	var oldest poolKey
	var oldestAt time.Time
	for k, e := range p.entries {
		if now.Sub(e.lastUsed) > poolIdleTimeout {
			e.tr.CloseIdleConnections()
			delete(p.entries, k)
			continue
		}
		if oldestAt.IsZero() || e.lastUsed.Before(oldestAt) {
			oldest, oldestAt = k, e.lastUsed
		}
	}
	if len(p.entries) >= poolMaxKeys {
		p.entries[oldest].tr.CloseIdleConnections()
		delete(p.entries, oldest)
	}
}

// close closes every idle connection and keeps no more.
func (p *upstreamPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, e := range p.entries {
		e.tr.CloseIdleConnections()
		delete(p.entries, k)
	}
}

// clientIP is the address part of a request's RemoteAddr.
func clientIP(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// credentialKey names a credential for the pool key.
func credentialKey(c *Credential) string {
	return http.CanonicalHeaderKey(c.Header) + "@" + c.authority() + "/" + c.Scheme + "/" + strconv.Quote(c.Source)
}

// copyBuffers lends the forwarder's and the credential listener's
// ReverseProxy their 32 KiB response-copy buffers; without it each
// response allocates (and the collector clears) a new one.
type copyBuffers struct{ p sync.Pool }

func (b *copyBuffers) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *copyBuffers) Put(buf []byte) { b.p.Put(&buf) }

var responseBuffers = &copyBuffers{}

// noBody is an empty request body the transport cannot rewind.
type noBody struct{}

func (noBody) Read([]byte) (int, error) { return 0, io.EOF }
func (noBody) Close() error             { return nil }
