//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// refusedErr reports whether err is the sandbox (or the kernel) refusing
// an operation outright: seccomp's EPERM, Landlock's EACCES, a family,
// protocol or feature that is not there.
func refusedErr(err error) bool {
	for _, e := range []error{unix.EPERM, unix.EACCES, unix.EAFNOSUPPORT, unix.EPROTONOSUPPORT,
		unix.ESOCKTNOSUPPORT, unix.EOPNOTSUPP, unix.ENOPROTOOPT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sentErr reports whether a MSG_FASTOPEN sendto ended with the SYN sent:
// it returned, is in progress (non-blocking), or the target reset it.
func sentErr(err error) bool {
	return err == nil || errors.Is(err, unix.EINPROGRESS) || errors.Is(err, unix.ECONNREFUSED) ||
		errors.Is(err, unix.EALREADY) || errors.Is(err, unix.EISCONN)
}

// judgeFastOpen judges one target from three measurements: a plain
// connect(2) (the baseline: Landlock must refuse it with EACCES for the
// bypass to mean anything), setting TCP_FASTOPEN_CONNECT, and sendto with
// MSG_FASTOPEN. TCP_FASTOPEN_CONNECT accepted is a violation on its own;
// a MSG_FASTOPEN send is one when connect(2) to the same port is refused.
// When connect(2) is not refused the port is the connect probes' concern,
// and a send proves nothing here.
func judgeFastOpen(baseline, optErr, sendErr error) (Outcome, string) {
	ev := fmt.Sprintf("connect=%s, TCP_FASTOPEN_CONNECT=%s, sendto(MSG_FASTOPEN)=%s", errNote(baseline), errNote(optErr), errNote(sendErr))
	landlocked := errors.Is(baseline, unix.EACCES) || errors.Is(baseline, unix.EPERM)
	switch {
	case optErr == nil:
		return Allowed, "TCP_FASTOPEN_CONNECT was accepted: " + ev
	case sentErr(sendErr) && landlocked:
		return Allowed, "MSG_FASTOPEN connected where connect(2) is refused: " + ev
	case sentErr(sendErr):
		return Error, "connect(2) itself is not refused here, so there is no rule to bypass (see the connect probes): " + ev
	case refusedErr(optErr) && refusedErr(sendErr):
		return Denied, "Fast Open is refused: " + ev
	}
	return Error, "unexpected result: " + ev
}

// fastOpenTargets are ports outside the agent's policy on the sandbox's own
// containers: the sidecar's and the gateway's port plus one. Without a
// sidecar or gateway that resolves (the negative control), the host's
// addresses on the sidecar port plus one.
func fastOpenTargets(ctx context.Context, c *Context) []netip.AddrPort {
	var out []netip.AddrPort
	for _, raw := range []string{c.SidecarURL, c.GatewayURL} {
		u, err := url.Parse(raw)
		if raw == "" || err != nil {
			continue
		}
		port := urlPort(raw, 80) + 1
		for _, a := range lookupLocal(ctx, u.Hostname()) {
			out = append(out, netip.AddrPortFrom(a, port))
		}
	}
	if len(out) > 0 {
		return out
	}
	addrs, _ := hostAddrs(c)
	for _, a := range addrs {
		out = append(out, netip.AddrPortFrom(a, urlPort(c.SidecarURL, 8000)+1))
	}
	return out
}

// lookupLocal resolves host (an IP or a name, /etc/hosts first) and keeps
// its IPv4 loopback and private addresses: the sandbox's own containers.
func lookupLocal(ctx context.Context, host string) []netip.Addr {
	if a, err := netip.ParseAddr(host); err == nil {
		if localAddr(a) && a.Unmap().Is4() {
			return []netip.Addr{a.Unmap()}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if a = a.Unmap(); localAddr(a) {
			out = append(out, a)
		}
	}
	return out
}

func fastOpen(ctx context.Context, c *Context) Result {
	targets := fastOpenTargets(ctx, c)
	if len(targets) == 0 {
		return errored("No target for Fast Open: neither the sidecar, the gateway nor the host has an address.", "")
	}
	var names []string
	for _, t := range targets {
		names = append(names, t.String())
	}
	as := tryAll(names, func(t string) (Outcome, string) { return fastOpenOne(ctx, netip.MustParseAddrPort(t)) })
	r := combine("Fast Open", as)
	switch r.Outcome {
	case Allowed:
		r.Summary = "A TCP connection can be opened with Fast Open."
	case Denied:
		r.Summary = "Fast Open is refused on every target."
	}
	return r
}

func fastOpenOne(ctx context.Context, t netip.AddrPort) (Outcome, string) {
	d := net.Dialer{Timeout: reachWait}
	conn, baseline := d.DialContext(ctx, "tcp4", t.String())
	if baseline == nil {
		conn.Close()
	}
	return judgeFastOpen(baseline, fastOpenConnectOpt(), fastOpenSend(t))
}

// fastOpenConnectOpt sets TCP_FASTOPEN_CONNECT on a fresh socket (nothing
// is sent: the option only changes what a later connect does).
func fastOpenConnectOpt() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1)
}

// fastOpenSend is sendto(MSG_FASTOPEN) on an unconnected, non-blocking TCP
// socket: EINPROGRESS means the SYN went out.
func fastOpenSend(t netip.AddrPort) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte("mcpsidecar-probe"), unix.MSG_FASTOPEN, sockaddr(t))
}

// listenUnbound calls listen(2) on a TCP socket that was never bound: the
// kernel picks an ephemeral port without a bind(2) for Landlock to check.
func listenUnbound() Result {
	var ev []string
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			ev = append(ev, fmt.Sprintf("family %d socket: %s", family, errNote(err)))
			continue
		}
		err = unix.Listen(fd, 1)
		if err == nil {
			port := 0
			if sa, err := unix.Getsockname(fd); err == nil {
				port = sockPort(sa)
			}
			unix.Close(fd)
			return allowed(fmt.Sprintf("listen(2) without bind(2) is listening on ephemeral port %d.", port), strings.Join(ev, "; "))
		}
		unix.Close(fd)
		ev = append(ev, fmt.Sprintf("family %d listen: %s", family, errNote(err)))
		if !refusedErr(err) {
			return errored("listen(2) failed unexpectedly.", strings.Join(ev, "; "))
		}
	}
	return denied("listen(2) without bind(2) is refused.", strings.Join(ev, "; "))
}

func sockPort(sa unix.Sockaddr) int {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return s.Port
	case *unix.SockaddrInet6:
		return s.Port
	}
	return 0
}

// sockSpec is one kind of socket a probe tries to create (and bind).
type sockSpec struct {
	Name                string
	Domain, Type, Proto int
	Bind                unix.Sockaddr // bound after creation when set
}

var (
	udpSockets = []sockSpec{
		{"udp4", unix.AF_INET, unix.SOCK_DGRAM, 0, &unix.SockaddrInet4{}},
		{"udp4 IPPROTO_UDP", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP, &unix.SockaddrInet4{}},
		{"udp6", unix.AF_INET6, unix.SOCK_DGRAM, 0, &unix.SockaddrInet6{}},
		{"udplite4", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE, &unix.SockaddrInet4{}},
	}
	icmpSockets = []sockSpec{
		{"icmp4 datagram", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP, nil},
		{"icmp6 datagram", unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6, nil},
	}
	netlinkSockets = []sockSpec{
		{"netlink route (raw)", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}},
		{"netlink route (dgram)", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_ROUTE, nil},
	}
	rawSockets = []sockSpec{
		{"raw IPv4 (IPPROTO_RAW)", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW, nil},
		{"raw IPv4 (UDP)", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP, nil},
		{"raw IPv6 (TCP)", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_TCP, nil},
		{"packet (raw)", unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)), nil},
		{"packet (dgram)", unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)), nil},
	}
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openSockets tries to create each kind of socket (and bind it where the
// spec says), closing it at once; nothing is sent. One created is Allowed.
func openSockets(specs []sockSpec) Result {
	var created, refused []string
	for _, s := range specs {
		note, err := openSocket(s)
		switch {
		case err == nil:
			created = append(created, s.Name+" "+note)
		case refusedErr(err):
			refused = append(refused, s.Name+": "+errNote(err))
		default:
			return errored("Creating a "+s.Name+" socket failed unexpectedly.", errNote(err))
		}
	}
	ev := "created: " + strings.Join(created, ", ") + "; refused: " + strings.Join(refused, ", ")
	if len(created) > 0 {
		return allowed(fmt.Sprintf("%d of %d sockets of this kind were created.", len(created), len(specs)), ev)
	}
	return denied("Every socket of this kind was refused.", ev)
}

func openSocket(s sockSpec) (string, error) {
	fd, err := unix.Socket(s.Domain, s.Type|unix.SOCK_CLOEXEC, s.Proto)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	if s.Bind == nil {
		return "(created)", nil
	}
	if err := unix.Bind(fd, s.Bind); err != nil {
		return "(created; bind: " + errNote(err) + ")", nil
	}
	return "(created and bound)", nil
}
