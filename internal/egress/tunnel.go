package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// tunnel relays bytes between a client and an upstream connection.
//
// An idle tunnel holds no copy buffer: each direction waits for its socket
// to become readable first and only then takes a buffer from a pool. The
// gateway can then hold thousands of idle tunnels (model streams, MCP
// sessions) in a few megabytes.
type tunnel struct {
	client, upstream net.Conn
	idle             time.Duration
	end              time.Time // hard deadline: the tunnel's MaxDuration
	up, down         atomic.Int64
	lastTouch        atomic.Int64 // unix nanoseconds of the last deadline push
	closeOnce        sync.Once
	// interrupted is set by the gateway's shutdown before it closes the
	// tunnel, so the decision line says so.
	interrupted atomic.Bool
}

const copyBufSize = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

func newTunnel(client, upstream net.Conn, idle time.Duration, end time.Time) *tunnel {
	return &tunnel{client: client, upstream: upstream, idle: idle, end: end}
}

func (t *tunnel) close() {
	t.closeOnce.Do(func() {
		t.client.Close()
		t.upstream.Close()
	})
}

// touch pushes both connections' deadlines to now+idle (capped at the hard
// end), at most every idle/16 so busy tunnels do not pay for it per read.
func (t *tunnel) touch() {
	now := time.Now()
	last := t.lastTouch.Load()
	if now.UnixNano()-last < int64(t.idle/16) || !t.lastTouch.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	dl := now.Add(t.idle)
	if dl.After(t.end) {
		dl = t.end
	}
	t.client.SetDeadline(dl)
	t.upstream.SetDeadline(dl)
}

// run relays until both directions are done. pending holds bytes the
// client sent right behind its CONNECT request.
func (t *tunnel) run(pending []byte) error {
	defer t.close()
	t.touch()
	if len(pending) > 0 {
		m, err := t.upstream.Write(pending)
		t.up.Add(int64(m))
		if err != nil {
			return err
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- t.pipe(t.upstream, t.client, &t.up) }()
	err := t.pipe(t.client, t.upstream, &t.down)
	err2 := <-errc
	return quiet(errors.Join(err, err2))
}

// pipe copies src to dst until EOF (then half-closes dst) or an error
// (then closes both, ending the other direction too).
func (t *tunnel) pipe(dst, src net.Conn, n *atomic.Int64) error {
	rd := rawReader(src)
	for {
		bp, nr, rerr := rd()
		if nr > 0 {
			t.touch()
			nw, werr := dst.Write((*bp)[:nr])
			n.Add(int64(nw))
			if werr != nil {
				copyBufs.Put(bp)
				t.close()
				return werr
			}
		}
		if bp != nil {
			copyBufs.Put(bp)
		}
		if rerr == io.EOF {
			closeWrite(dst)
			return nil
		}
		if rerr != nil {
			t.close()
			return rerr
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// quiet drops the errors that are the normal end of a tunnel: the peer or
// the gateway closed it.
func quiet(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errors.New("tunnel closed: idle or over its time limit")
	case errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return nil
	}
	return err
}
