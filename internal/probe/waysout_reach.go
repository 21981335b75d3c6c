//go:build linux

package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// reachWait bounds each attempt to reach the host: long enough for a reply
// on a bridge, short enough that the suite stays fast (attempts run in
// parallel).
const reachWait = 1500 * time.Millisecond

// reachOutcome classifies how an attempt to reach the host ended. Any
// answer from it (a connection, a reply, a TCP reset or an ICMP port
// unreachable, both of which surface as ECONNREFUSED) means the packet
// arrived: Allowed. No route, no neighbour, a refusal by the sandbox, or
// silence: Denied. Anything else was not measured: Error.
func reachOutcome(err error) Outcome {
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, unix.ECONNREFUSED):
		return Allowed
	case errors.Is(err, unix.EHOSTUNREACH), errors.Is(err, unix.ENETUNREACH), errors.Is(err, unix.ENETDOWN),
		errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.ETIMEDOUT),
		errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EAFNOSUPPORT), errors.Is(err, unix.EPROTONOSUPPORT),
		errors.Is(err, unix.EADDRNOTAVAIL), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return Denied
	case errors.As(err, &ne) && ne.Timeout():
		return Denied
	}
	return Error
}

// attempt is the outcome of one try against one target.
type attempt struct {
	Target  string
	Outcome Outcome
	Note    string
}

// tryAll runs try against every target at once and returns the attempts in
// target order.
func tryAll(targets []string, try func(string) (Outcome, string)) []attempt {
	out := make([]attempt, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			o, note := try(t)
			out[i] = attempt{Target: t, Outcome: o, Note: note}
		})
	}
	wg.Wait()
	return out
}

// combine judges a set of attempts: one Allowed opens the way; an Error
// with no Allowed means the measurement is incomplete.
func combine(what string, as []attempt) Result {
	var ev []string
	outcome := Denied
	for _, a := range as {
		ev = append(ev, a.Target+": "+a.Note)
		switch {
		case a.Outcome == Allowed:
			outcome = Allowed
		case a.Outcome == Error && outcome != Allowed:
			outcome = Error
		}
	}
	evidence := strings.Join(ev, "; ")
	switch outcome {
	case Allowed:
		return allowed("The host answered: "+what+".", evidence)
	case Error:
		return errored("An attempt to reach the host ended unexpectedly: "+what+".", evidence)
	}
	return denied(fmt.Sprintf("No host address answered (%d tried): %s.", len(as), what), evidence)
}

// errNote is an error's short form for evidence.
func errNote(err error) string {
	var se *os.SyscallError
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	case errors.As(err, &se):
		return se.Error()
	}
	return err.Error()
}

// agentPorts are the TCP ports the agent may connect to: the gateway's and
// the sidecar's, from the context's URLs (3128 and 8000 by default).
func agentPorts(c *Context) []uint16 {
	ports := []uint16{urlPort(c.GatewayURL, 3128), urlPort(c.SidecarURL, 8000)}
	slices.Sort(ports)
	return slices.Compact(ports)
}

func urlPort(raw string, def uint16) uint16 {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		return def
	}
	p, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil {
		return def
	}
	return uint16(p)
}

// hostTargets returns the host's addresses, or a Result saying why there
// is nothing to try (never a pass: an empty list measured nothing).
func hostTargets(c *Context) ([]netip.Addr, *Result) {
	addrs, err := hostAddrs(c)
	if err != nil {
		r := errored("The host's addresses could not be read.", err.Error())
		return nil, &r
	}
	if len(addrs) == 0 {
		r := errored("No host address was found on any network to try.", "")
		return nil, &r
	}
	return addrs, nil
}

func hostTCP(ctx context.Context, c *Context) Result {
	addrs, r := hostTargets(c)
	if r != nil {
		return *r
	}
	var targets []string
	for _, a := range addrs {
		for _, p := range agentPorts(c) {
			targets = append(targets, netip.AddrPortFrom(a, p).String())
		}
	}
	return combine("TCP", tryAll(targets, func(t string) (Outcome, string) {
		d := net.Dialer{Timeout: reachWait}
		conn, err := d.DialContext(ctx, "tcp", t)
		if err == nil {
			conn.Close()
			return Allowed, "connected"
		}
		if errors.Is(err, unix.ECONNREFUSED) {
			return Allowed, "reset (the host refused the port: it answered)"
		}
		return reachOutcome(err), errNote(err)
	}))
}

// dnsQuery is a DNS query for "localhost." A, without recursion: a name
// server on the host answers it locally and has no reason to forward it.
var dnsQuery = []byte{0x6d, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0, 0x00, 0x01, 0x00, 0x01}

func hostUDP(ctx context.Context, c *Context) Result {
	addrs, r := hostTargets(c)
	if r != nil {
		return *r
	}
	var targets []string
	for _, a := range addrs {
		targets = append(targets, netip.AddrPortFrom(a, 53).String())
	}
	return combine("UDP", tryAll(targets, func(t string) (Outcome, string) { return udpQuery(ctx, t) }))
}

func udpQuery(ctx context.Context, target string) (Outcome, string) {
	d := net.Dialer{Timeout: reachWait}
	conn, err := d.DialContext(ctx, "udp", target)
	if err != nil {
		return reachOutcome(err), "socket: " + errNote(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(reachWait))
	if _, err := conn.Write(dnsQuery); err != nil {
		return reachOutcome(err), "send: " + errNote(err)
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	switch {
	case err == nil:
		return Allowed, fmt.Sprintf("answered (%d bytes)", n)
	case errors.Is(err, unix.ECONNREFUSED):
		return Allowed, "ICMP port unreachable (the host answered)"
	}
	return reachOutcome(err), "no answer: " + errNote(err)
}

func hostEcho(ctx context.Context, c *Context) Result {
	addrs, r := hostTargets(c)
	if r != nil {
		return *r
	}
	var targets []string
	for _, a := range addrs {
		targets = append(targets, a.String())
	}
	return combine("ICMP echo", tryAll(targets, func(t string) (Outcome, string) {
		a := netip.MustParseAddr(t)
		o, note := echo(a, unix.SOCK_DGRAM)
		if o == Denied && strings.HasPrefix(note, "socket") {
			ro, rnote := echo(a, unix.SOCK_RAW)
			return ro, note + "; raw " + rnote
		}
		return o, note
	}))
}

// echo sends one echo request to addr over an ICMP socket of type typ
// (SOCK_DGRAM: the unprivileged ping socket; SOCK_RAW) connected to addr,
// and waits reachWait for an echo reply.
func echo(addr netip.Addr, typ int) (Outcome, string) {
	family, proto, req, reply := unix.AF_INET, unix.IPPROTO_ICMP, byte(8), byte(0)
	if addr.Is6() {
		family, proto, req, reply = unix.AF_INET6, unix.IPPROTO_ICMPV6, 128, 129
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return reachOutcome(err), "socket: " + errNote(err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(reachWait.Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Connect(fd, sockaddr(netip.AddrPortFrom(addr, 0))); err != nil {
		return reachOutcome(err), "connect: " + errNote(err)
	}
	if _, err := unix.Write(fd, echoRequest(req, typ == unix.SOCK_RAW && addr.Is4())); err != nil {
		return reachOutcome(err), "send: " + errNote(err)
	}
	return awaitReply(fd, reply, typ == unix.SOCK_RAW && addr.Is4())
}

// echoRequest is an echo request with identifier and sequence 0x6d63 ("mc");
// a raw IPv4 socket needs the checksum, which the kernel fills otherwise.
func echoRequest(typ byte, checksum bool) []byte {
	m := []byte{typ, 0, 0, 0, 0x6d, 0x63, 0x6d, 0x63, 'p', 'r', 'o', 'b', 'e'}
	if checksum {
		binary.BigEndian.PutUint16(m[2:], icmpChecksum(m))
	}
	return m
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// awaitReply reads until an echo reply arrives or reachWait passes; a raw
// IPv4 socket delivers the IP header first.
func awaitReply(fd int, reply byte, ipHeader bool) (Outcome, string) {
	buf := make([]byte, 1500)
	for deadline := time.Now().Add(reachWait); time.Now().Before(deadline); {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return reachOutcome(err), "no reply: " + errNote(err)
		}
		m := buf[:n]
		if ipHeader && n > 0 {
			m = m[min(int(m[0]&0x0f)*4, n):]
		}
		if len(m) > 0 && m[0] == reply {
			return Allowed, "echo reply"
		}
	}
	return Denied, "no reply"
}

// sockaddr converts an address and port to a unix.Sockaddr.
func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if a := ap.Addr().Unmap(); a.Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}
