package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// serveConnect handles CONNECT host:port: check, dial the checked address,
// then hijack the client connection and relay bytes both ways.
func (g *Gateway) serveConnect(w http.ResponseWriter, r *http.Request, d *Decision) {
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
	d.Port = portNumber(port)
	if dn := checkHostHeader(r, host, port, true); dn != nil {
		g.refuse(w, d, dn)
		return
	}
	t, dn := g.authorize(r.Context(), d, true, host, port)
	if dn != nil {
		g.refuse(w, d, dn)
		return
	}
	up, addr, err := g.dialTarget(r.Context(), t)
	d.ResolvedIP = addr.String()
	d.Decision = Allow
	if err != nil {
		g.failUpstream(w, d, err)
		return
	}
	g.relay(w, d, up)
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

// relay hijacks the client connection, confirms the tunnel and copies
// bytes until either side is done, the tunnel idles or outlives its limit,
// or the gateway shuts down. The decision line is written at the end, with
// the byte counts.
func (g *Gateway) relay(w http.ResponseWriter, d *Decision, up net.Conn) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		g.failUpstream(w, d, errors.New("connection cannot be hijacked"))
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		d.Error = fmt.Sprintf("hijacking client connection: %v", err)
		g.record(d)
		return
	}
	t := newTunnel(underlying(c), up, g.limits.IdleTimeout, d.Time.Add(g.limits.MaxDuration))
	if !g.track(t) {
		t.close()
		d.Error = "gateway shutting down"
		g.record(d)
		return
	}
	defer g.untrack(t)
	_, err = io.WriteString(t.client, "HTTP/1.1 200 Connection established\r\n\r\n")
	if err == nil {
		err = t.run(brw.Reader)
	}
	d.BytesUp, d.BytesDown = t.up.Load(), t.down.Load()
	if err != nil {
		d.Error = err.Error()
	}
	g.record(d)
}

// track registers an open tunnel so Shutdown can close it; false when the
// gateway is already shutting down.
func (g *Gateway) track(t *tunnel) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
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
