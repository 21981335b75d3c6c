package egress

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/textproto"
	"sync"
)

// net/http drops the Host header of an absolute-URI request (RFC 9112
// says to ignore it), but a proxy must refuse a request whose Host header
// disagrees with its URI: the threat is an upstream or an intermediary
// routing by Host to a destination the allowlist never saw (domain
// fronting). So the listener keeps a copy of each connection's first
// header block, and the gateway serves one request per connection: every
// answer, the readiness probe's included, says "Connection: close", and a
// second request read on a connection is refused ([claimConn]), so the
// recorded block is always the request's own. The threat a kept-alive
// connection posed: a first request with an agreeing Host header, then a
// second one whose Host header was never read.

type rawHeaderKey struct{}

// recordingListener wraps accepted connections in a [recordingConn].
type recordingListener struct {
	net.Listener
	limit int
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, limit: l.limit}, nil
}

// recordingConn copies what is read from it until the end of the first
// header block, or limit bytes.
type recordingConn struct {
	net.Conn
	limit int

	mu     sync.Mutex
	buf    []byte
	done   bool
	served int // requests handed to the gateway on this connection
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.record(p[:n])
	}
	return n, err
}

func (c *recordingConn) record(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.buf = append(c.buf, p[:min(len(p), c.limit-len(c.buf))]...)
	if i := bytes.Index(c.buf, []byte("\r\n\r\n")); i >= 0 {
		c.buf, c.done = c.buf[:i+4], true
	} else if len(c.buf) >= c.limit {
		c.done = true
	}
}

// headerBlock returns the first header block read, if complete.
func (c *recordingConn) headerBlock() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf, c.done && bytes.HasSuffix(c.buf, []byte("\r\n\r\n"))
}

// claimConn reports whether r is the first request read on its
// connection, and marks the connection used. A request on a connection
// the recorder does not wrap is never the first (its headers are unknown).
func claimConn(r *http.Request) bool {
	c, _ := r.Context().Value(rawHeaderKey{}).(*recordingConn)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.served++
	return c.served == 1
}

func rawHeaderContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, rawHeaderKey{}, c)
}

// rawHostHeaders returns the Host header values the client sent, parsed
// the way net/http parses them. ok is false when they cannot be known.
func rawHostHeaders(r *http.Request) (hosts []string, ok bool) {
	c, _ := r.Context().Value(rawHeaderKey{}).(*recordingConn)
	if c == nil {
		return nil, false
	}
	block, complete := c.headerBlock()
	if !complete {
		return nil, false
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(block)))
	if _, err := tp.ReadLine(); err != nil {
		return nil, false
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, false
	}
	return h.Values("Host"), true
}

// underlying returns the connection beneath a recordingConn, so that a
// tunnel copies without the recording wrapper and can half-close.
func underlying(c net.Conn) net.Conn {
	if rc, ok := c.(*recordingConn); ok {
		return rc.Conn
	}
	return c
}
