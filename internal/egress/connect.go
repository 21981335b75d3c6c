package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// serveConnect handles CONNECT host:port: check, dial the checked address,
// then hijack the client connection and relay bytes both ways. done is
// called once the request is over: now, or when the tunnel ends.
func (g *Gateway) serveConnect(w http.ResponseWriter, r *http.Request, d *Decision, done func()) {
	handedOff := false
	defer func() {
		if !handedOff {
			done()
		}
	}()
	if r.URL.User != nil {
		g.refuse(w, d, deny(http.StatusForbidden, "user information in the CONNECT target is refused"))
		return
	}
	host, port, err := net.SplitHostPort(r.URL.Host)
	if err != nil {
		d.Host = truncate(r.URL.Host, 255)
		g.refuse(w, d, deny(http.StatusBadRequest, "CONNECT target %q is not host:port", truncate(r.URL.Host, 255)))
		return
	}
	d.Host, d.Port = truncate(host, 255), portNumber(port)
	if dn := checkHostHeader(r, host, port, true); dn != nil {
		g.refuse(w, d, dn)
		return
	}
	t, dn := g.authorize(r.Context(), d, true, host, port)
	if dn == nil {
		dn = carriedDenial(g.held, r, d)
	}
	if dn != nil {
		g.refuse(w, d, dn)
		return
	}
	if g.full.Load() {
		refuseFull(w) // the log filled while this request was judged
		return
	}
	up, addr, err := g.dialTarget(r.Context(), t)
	d.ResolvedIP = addr.String()
	d.Decision = Allow
	if err != nil {
		g.failUpstream(w, d, err)
		return
	}
	handedOff = g.relay(w, d, up, done)
}

// failUpstream answers an allowed request whose upstream failed.
func (g *Gateway) failUpstream(w http.ResponseWriter, d *Decision, err error) {
	d.Error = err.Error()
	g.record(d)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "mcpsidecar egress gateway: upstream: %v\n", err)
}

// relay hijacks the client connection, confirms the tunnel and hands it to
// a goroutine of its own that copies bytes until either side is done, the
// tunnel idles or outlives its limit, or the gateway shuts down; the
// decision line is written then, with the byte counts. The handler returns
// at once, so an idle tunnel holds neither the handler's stack nor the
// server's per-connection buffers. It reports whether it handed off (and
// so will call done).
func (g *Gateway) relay(w http.ResponseWriter, d *Decision, up net.Conn, done func()) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		g.failUpstream(w, d, errors.New("connection cannot be hijacked"))
		return false
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		d.Error = fmt.Sprintf("hijacking client connection: %v", err)
		g.record(d)
		return false
	}
	// Bytes the client sent right behind its CONNECT request.
	pending, _ := brw.Reader.Peek(brw.Reader.Buffered())
	pending = append([]byte(nil), pending...)
	t := newTunnel(underlying(c), up, g.limits.IdleTimeout, d.Time.Add(g.limits.MaxDuration))
	if !g.track(t) {
		t.close()
		d.Error = "gateway shutting down"
		g.record(d)
		return false
	}
	go func() {
		defer done()
		defer g.untrack(t)
		_, err := io.WriteString(t.client, "HTTP/1.1 200 Connection established\r\n\r\n")
		if err == nil {
			err = t.run(pending)
		}
		d.BytesUp, d.BytesDown = t.up.Load(), t.down.Load()
		switch {
		case t.interrupted.Load():
			d.Error = interruptedError(err)
		case err != nil:
			d.Error = err.Error()
		}
		g.record(d)
	}()
	return true
}

// track registers an open tunnel so Shutdown (or a full decision log)
// can close it; false when the gateway is already shutting down or its
// log is full.
func (g *Gateway) track(t *tunnel) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing || g.full.Load() {
		return false
	}
	g.tunnels[t] = struct{}{}
	return true
}

func (g *Gateway) untrack(t *tunnel) {
	g.mu.Lock()
	delete(g.tunnels, t)
	g.mu.Unlock()
}
