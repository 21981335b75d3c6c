//go:build unix

package egress

import (
	"io"
	"net"
	"os"
	"syscall"
)

// rawReader returns a read function for c that takes a copy buffer only
// when c has data: on a socket it reads inside the runtime poller's
// readiness callback (one read(2) per call, the buffer given back while
// the socket would block, deadlines honoured), so an idle tunnel holds no
// buffer and a busy one pays no extra system call to find out. Other
// connections read into a pooled buffer.
func rawReader(c net.Conn) func() (*[]byte, int, error) {
	plain := func() (*[]byte, int, error) {
		bp := copyBufs.Get().(*[]byte)
		nr, err := c.Read(*bp)
		return bp, nr, err
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return plain
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return plain
	}
	return func() (*[]byte, int, error) {
		var bp *[]byte
		var nr int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			bp = copyBufs.Get().(*[]byte)
			for {
				nr, rerr = syscall.Read(int(fd), *bp)
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr == syscall.EAGAIN {
				copyBufs.Put(bp)
				bp = nil
				return false
			}
			return true
		})
		switch {
		case err != nil:
			if bp != nil {
				copyBufs.Put(bp)
			}
			return nil, 0, err
		case rerr != nil:
			return bp, 0, os.NewSyscallError("read", rerr)
		case nr == 0:
			return bp, 0, io.EOF
		}
		return bp, nr, nil
	}
}
