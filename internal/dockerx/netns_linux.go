package dockerx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
		errc <- dropDefaultRoutes()
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("dropping the default route of process %d: %w", p.pid, err)
	}
	return nil
}

// dropDefaultRoutes deletes the default routes of this thread's network
// namespace.
func dropDefaultRoutes() error {
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		for i := 0; i < 8; i++ { // one default route per interface at most
			err := deleteDefaultRoute(family)
			if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EAFNOSUPPORT) {
				break
			}
			if err != nil {
				return err
			}
		}
	}
	if left, err := hasDefaultRoute(); err != nil || left {
		return fmt.Errorf("a default route is still present (%v)", err)
	}
	return nil
}

// deleteDefaultRoute sends one RTM_DELROUTE for dst/0 in the main table and
// reads the kernel's acknowledgement.
func deleteDefaultRoute(family uint8) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("opening a netlink socket: %w", err)
	}
	defer unix.Close(fd)
	var msg bytes.Buffer
	hdr := unix.NlMsghdr{Len: unix.SizeofNlMsghdr + unix.SizeofRtMsg, Type: unix.RTM_DELROUTE,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK, Seq: 1}
	rt := unix.RtMsg{Family: family, Table: unix.RT_TABLE_MAIN, Scope: unix.RT_SCOPE_NOWHERE}
	_ = binary.Write(&msg, binary.NativeEndian, hdr)
	_ = binary.Write(&msg, binary.NativeEndian, rt)
	if err := unix.Sendto(fd, msg.Bytes(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sending RTM_DELROUTE: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("reading the netlink answer: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return fmt.Errorf("parsing the netlink answer: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
				return unix.Errno(-code)
			}
		}
	}
	return nil
}

// hasDefaultRoute reads the IPv4 routing table of this thread's network
// namespace.
func hasDefaultRoute() (bool, error) {
	f, err := os.Open("/proc/thread-self/net/route")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 7 && fields[1] == "00000000" && fields[7] == "00000000" {
			return true, nil
		}
	}
	return false, sc.Err()
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

// DropRouteCommand is our binary's hidden command that removes the
// default routes of the network namespace it runs in
// ([DropDefaultRoutesHere]); the host runs it as a helper container that
// shares one role's network namespace, on old engines.
const DropRouteCommand = "net-drop-default-route"

// DropDefaultRoutesHere removes every default route of the calling
// process's network namespace and checks that none is left.
func DropDefaultRoutesHere() error { return dropDefaultRoutes() }
