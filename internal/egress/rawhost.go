package egress

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
)

// net/http drops the Host header of an absolute-URI request (RFC 9112
// says to ignore it), but a proxy must refuse a request whose Host header
// disagrees with its URI: the threat is an upstream or an intermediary
// routing by Host to a destination the allowlist never saw (domain
// fronting). So the listener keeps a copy of each request's header block:
// [recordingConn] follows the bytes net/http reads, in the order it reads
// them, and cuts them into requests the way net/http does (the header
// block ends at the first empty line; a body is exactly its
// Content-Length; after a POST up to four CR/LF bytes are skipped).
//
// The threat a kept-alive connection poses is request smuggling: a first
// request with an agreeing Host header, then a second one whose Host
// header is never read, or is read from the wrong block. So every request
// claims its own block ([claimRequest]), and the claim proves the block is
// that request's: its request line must be byte for byte the one net/http
// parsed, and its framing (Content-Length, no Transfer-Encoding) the one
// net/http used. If the two ever disagree, or the recorder cannot frame a
// body for certain (chunked, several lengths, CONNECT, an oversized block),
// no later request on the connection is served: it gets a refusal with a
// decision line, and the connection closes. A request read after "OPTIONS
// *" or after any refusal never reaches the handler at all, since every
// refusal closes its connection.

type headerBlockKey struct{}

// headerBlock is one request's header block as the client sent it.
type headerBlock struct {
	requestLine string
	method      string
	hosts       []string // every Host header value, as net/http reads them
	size        int64    // the block's bytes: request line, headers, empty line
	length      int64    // Content-Length; 0 when absent
	// framed says the recorder knows where the body ends, so the next
	// request on the connection can be recorded too.
	framed bool
}

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

// Recorder states.
const (
	recHeader = iota // reading a header block into cur
	recBody          // skipping bodyLeft bytes of a body
	recSkip          // skipping up to skipLeft CR/LF bytes after a POST
	recDone          // framing unknown from here: nothing more is recorded
)

// recordingConn records each request's header block from what is read
// through it.
type recordingConn struct {
	net.Conn
	limit int

	mu         sync.Mutex
	state      int
	cur        []byte // the header block being read
	lineStart  int    // where cur's current line starts
	bodyLeft   int64
	skipLeft   int
	lastMethod string
	blocks     []*headerBlock // complete blocks not yet claimed
	poisoned   bool           // a claim failed, or a block could not be framed
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
	for len(p) > 0 {
		switch c.state {
		case recDone:
			return
		case recSkip:
			for c.skipLeft > 0 && len(p) > 0 && (p[0] == '\r' || p[0] == '\n') {
				p, c.skipLeft = p[1:], c.skipLeft-1
			}
			if c.skipLeft == 0 || len(p) > 0 {
				c.state = recHeader
			}
		case recBody:
			n := int64(len(p))
			if n > c.bodyLeft {
				n = c.bodyLeft
			}
			p, c.bodyLeft = p[n:], c.bodyLeft-n
			if c.bodyLeft == 0 {
				c.nextRequest()
			}
		case recHeader:
			p = c.header(p)
		}
	}
}

// header appends p to the block being read until the block ends, and
// returns what follows it.
func (c *recordingConn) header(p []byte) []byte {
	for i, b := range p {
		c.cur = append(c.cur, b)
		if len(c.cur) > c.limit {
			// net/http answers 431 and closes; nothing more to record.
			c.state, c.cur = recDone, nil
			return nil
		}
		if b != '\n' {
			continue
		}
		line := c.cur[c.lineStart : len(c.cur)-1]
		first := c.lineStart == 0
		c.lineStart = len(c.cur)
		if first || len(bytes.TrimSuffix(line, []byte("\r"))) != 0 {
			continue
		}
		c.finishBlock()
		return p[i+1:]
	}
	return nil
}

// finishBlock parses the complete block in cur, the way net/http's
// textproto reader does, queues it and decides how the body is framed.
func (c *recordingConn) finishBlock() {
	blk := parseHeaderBlock(c.cur)
	c.cur, c.lineStart = nil, 0
	c.blocks = append(c.blocks, blk)
	c.lastMethod = blk.method
	if !blk.framed {
		c.state = recDone
		return
	}
	c.bodyLeft = blk.length
	if c.bodyLeft > 0 {
		c.state = recBody
		return
	}
	c.nextRequest()
}

// nextRequest starts the next request after a body: net/http discards up
// to four leading CR or LF bytes after a POST (RFC 7230 section 3).
func (c *recordingConn) nextRequest() {
	c.state = recHeader
	if c.lastMethod == http.MethodPost {
		c.state, c.skipLeft = recSkip, 4
	}
}

// parseHeaderBlock reads a complete header block. A block whose body the
// recorder cannot frame for certain is not framed: a CONNECT (a tunnel
// follows), any Transfer-Encoding, a Content-Length that is not one
// decimal number.
func parseHeaderBlock(raw []byte) *headerBlock {
	blk := &headerBlock{size: int64(len(raw))}
	tp := textproto.NewReader(bufio.NewReaderSize(bytes.NewReader(raw), len(raw)))
	line, err := tp.ReadLine()
	if err != nil {
		return blk
	}
	blk.requestLine = line
	blk.method, _, _ = strings.Cut(line, " ")
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return blk
	}
	blk.hosts = h.Values("Host")
	if blk.method == http.MethodConnect || len(h.Values("Transfer-Encoding")) > 0 {
		return blk
	}
	switch cl := h.Values("Content-Length"); {
	case len(cl) == 0:
		blk.framed = true
	case len(cl) == 1:
		v := textproto.TrimString(cl[0])
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n >= 0 && v != "" && v[0] != '+' {
			blk.length, blk.framed = n, true
		}
	}
	return blk
}

// claim hands r the oldest unclaimed block, after checking that it is r's
// own: the same request line and the same framing as net/http read. On
// any doubt the connection is poisoned: no later request is served.
func (c *recordingConn) claim(r *http.Request) (*headerBlock, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.poisoned {
		return nil, "this connection cannot carry another request (the one before it could not be framed for certain)"
	}
	if len(c.blocks) == 0 {
		c.poisoned = true
		return nil, "request headers could not be read back to check the Host header"
	}
	blk := c.blocks[0]
	c.blocks = c.blocks[1:]
	if blk.requestLine != r.Method+" "+r.RequestURI+" "+r.Proto {
		c.poisoned = true
		return nil, "request headers could not be read back to check the Host header (the recorded request line differs)"
	}
	if !blk.framed || len(r.TransferEncoding) > 0 || r.ContentLength != blk.length {
		// This request's own block is right; a later one's could not
		// be found for certain.
		c.poisoned = true
		if blk.framed {
			return nil, "request headers could not be read back to check the Host header (the body framing differs)"
		}
	}
	return blk, ""
}

// lastRequest reports whether no further request may follow on the
// connection: its answer then says "Connection: close".
func (c *recordingConn) lastRequest() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.poisoned
}

// claimRequest gives r its own header block, in its context. A request
// on a connection the recorder does not wrap has none (its headers are
// unknown) and is refused.
func claimRequest(r *http.Request) (*http.Request, string) {
	c, _ := r.Context().Value(rawHeaderKey{}).(*recordingConn)
	if c == nil {
		return r, "request headers could not be read back to check the Host header"
	}
	blk, reason := c.claim(r)
	if blk == nil {
		return r, reason
	}
	return r.WithContext(context.WithValue(r.Context(), headerBlockKey{}, blk)), ""
}

// mustClose reports whether r's connection must end after this answer.
func mustClose(r *http.Request) bool {
	c, _ := r.Context().Value(rawHeaderKey{}).(*recordingConn)
	return c == nil || c.lastRequest()
}

type rawHeaderKey struct{}

func rawHeaderContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, rawHeaderKey{}, c)
}

// rawHostHeaders returns the Host header values the client sent with r,
// parsed the way net/http parses them. ok is false when they cannot be
// known.
func rawHostHeaders(r *http.Request) (hosts []string, ok bool) {
	blk, _ := r.Context().Value(headerBlockKey{}).(*headerBlock)
	if blk == nil {
		return nil, false
	}
	return blk.hosts, true
}

// underlying returns the connection beneath a recordingConn, so that a
// tunnel copies without the recording wrapper and can half-close.
func underlying(c net.Conn) net.Conn {
	if rc, ok := c.(*recordingConn); ok {
		return rc.Conn
	}
	return c
}

// requestHeadBytes is the size of r's request line and header block as
// the client sent them: the recorded block on the proxy listener; on the
// credential listener, which keeps no copy, as net/http parsed them
// (which differs from the wire only in optional whitespace and repeated
// header lines).
func requestHeadBytes(r *http.Request) int64 {
	if blk, _ := r.Context().Value(headerBlockKey{}).(*headerBlock); blk != nil {
		return blk.size
	}
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" && r.Header.Get("Host") == "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return int64(n + 2)
}
