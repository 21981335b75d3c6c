package dockerx

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/inside"
)

// DropDefaultRoutes deletes the IPv4 and IPv6 default routes inside the
// process's network namespace (a container's init), then checks none is
// left. Threat: engines older than 25 give containers on --internal
// networks a default route to the bridge; Docker's isolation rules drop
// what goes through it, but a workload sees a way out and probes it. With
// the route gone, a connect outside the subnet fails at once, as on newer
// engines. Needs CAP_SYS_ADMIN and CAP_NET_ADMIN on the host (root).
func (p *hostProcess) DropDefaultRoutes() error {
	errc := make(chan error, 1)
	go func() {
		// The thread enters another namespace and is never unlocked, so
		// the runtime discards it when this goroutine ends.
		runtime.LockOSThread()
		if err := p.enterNetns(); err != nil {
			errc <- err
			return
		}
		errc <- inside.DropDefaultRoutes()
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("dropping the default route of process %d: %w", p.pid, err)
	}
	return nil
}

// DialInNetns connects to addr (host:port) from inside the process's
// network namespace (a container's init), so the host can check a
// container's own loopback listener without having, or using, an address
// on the container's network. Threat: the host has no address on an
// internal network (OptionInhibitIPv4); a packet the host sent to a
// container's internal address would leave by the host's default route.
// The socket is created in that namespace and stays there; the thread
// that entered it is never unlocked, so the runtime discards it. Needs
// CAP_SYS_ADMIN on the host (root); without it the error wraps EPERM.
func (p *hostProcess) DialInNetns(ctx context.Context, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := p.enterNetns(); err != nil {
			res <- result{err: err}
			return
		}
		d := net.Dialer{Timeout: 2 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", addr)
		res <- result{conn, err}
	}()
	r := <-res
	return r.conn, r.err
}

// Listening reports whether the process's network namespace has a TCP
// socket listening on port, read from /proc/<pid>/net/tcp and tcp6: the
// readiness check that needs no privilege and sends nothing.
func (p *hostProcess) Listening(port int) (bool, error) {
	var firstErr error
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		data, err := p.readFile(f)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if listeningIn(string(data), port) {
			return true, nil
		}
	}
	return false, firstErr
}

// listeningIn scans /proc/net/tcp text for a socket in state LISTEN (0A)
// whose local port is port.
func listeningIn(table string, port int) bool {
	suffix := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "0A" && strings.HasSuffix(f[1], suffix) {
			return true
		}
	}
	return false
}
