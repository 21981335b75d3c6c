package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// Egress scopes: the gateway judges each request under the scope of who
// asks. The agent may reach the allowlist except the declared MCP servers'
// hosts (those are the sidecar's, with their credentials); the sidecar,
// acting for server X, only X's host. The sidecar names the server and the
// tool on each request in [HeaderScope]; the gateway believes the claim
// only from the sidecar's own address on the internal network, which it
// looks up by the sidecar's alias through Docker's resolver. The threat: a
// workload that claims the sidecar's scope to reach an MCP server (and
// have its credential added) directly. It cannot open a TCP connection
// from the sidecar's address: without CAP_NET_RAW (every role drops all
// capabilities) it cannot send a forged packet, and even a forged SYN's
// answer would go to the real sidecar; and it cannot take the sidecar's
// alias, which only the engine assigns.

// HeaderScope is the header the sidecar sends on each upstream request
// (on the CONNECT, or on an absolute-URI request): "server=NAME; tool=TOOL".
// It is a Proxy-* header, so the gateway never forwards it.
const HeaderScope = "Proxy-Mcpsidecar-Scope"

// EnvGatewayScopes is the gateway's scope table, JSON [ScopeConfig].
const EnvGatewayScopes = "MCPSIDECAR_GATEWAY_SCOPES"

// Scope roles.
const (
	RoleAgent   = "agent"
	RoleSidecar = "sidecar"
)

// Scope is who a request was judged for.
type Scope struct {
	Role   string `json:"role"`
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
}

// String is "agent" or "sidecar/docs/search" (tool left out when none).
func (s Scope) String() string {
	parts := []string{s.Role}
	if s.Server != "" {
		parts = append(parts, s.Server)
	}
	if s.Tool != "" {
		parts = append(parts, s.Tool)
	}
	return strings.Join(parts, "/")
}

// ScopeConfig is the scope table the harness gives the gateway.
type ScopeConfig struct {
	// SidecarHost is the name the sidecar's addresses are looked up by
	// (its alias on the internal network).
	SidecarHost string `json:"sidecar_host"`
	// Servers are the declared MCP servers and the host:port each may
	// reach (the host alone means 443).
	Servers []ScopeServer `json:"servers"`
}

// ScopeServer is one server's scope.
type ScopeServer struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
}

type hostPort struct {
	host string
	port uint16
}

// Scoper judges scopes. Build it with [NewScoper].
type Scoper struct {
	sidecarHost string
	servers     map[string][]hostPort
	all         []hostPort
	lookup      func(ctx context.Context, host string) ([]netip.Addr, error)

	mu      sync.Mutex
	addrs   []netip.Addr
	fetched time.Time
}

// sidecarAddrTTL bounds how long a lookup of the sidecar is reused: the
// sidecar's address is fixed for a run; a miss is retried at once.
const sidecarAddrTTL = 30 * time.Second

// NewScoper checks cfg. lookup resolves the sidecar's alias (nil: the
// system resolver).
func NewScoper(cfg ScopeConfig, lookup func(ctx context.Context, host string) ([]netip.Addr, error)) (*Scoper, error) {
	if cfg.SidecarHost == "" {
		return nil, fmt.Errorf("scopes: sidecar_host is required")
	}
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	s := &Scoper{sidecarHost: cfg.SidecarHost, servers: map[string][]hostPort{}, lookup: lookup}
	for _, srv := range cfg.Servers {
		if !serverNameRE.MatchString(srv.Name) {
			return nil, fmt.Errorf("scopes: invalid server name %q", srv.Name)
		}
		if _, dup := s.servers[srv.Name]; dup {
			return nil, fmt.Errorf("scopes: server %q twice", srv.Name)
		}
		if len(srv.Hosts) == 0 {
			return nil, fmt.Errorf("scopes: server %q has no hosts", srv.Name)
		}
		for _, h := range srv.Hosts {
			hp, err := parseScopeHost(h)
			if err != nil {
				return nil, fmt.Errorf("scopes: server %q: %w", srv.Name, err)
			}
			s.servers[srv.Name] = append(s.servers[srv.Name], hp)
			s.all = append(s.all, hp)
		}
	}
	return s, nil
}

var (
	serverNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	toolNameRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

func parseScopeHost(s string) (hostPort, error) {
	host, port := s, uint16(443)
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return hostPort{}, fmt.Errorf("invalid port in host %q", s)
		}
		host, port = h, uint16(n)
	}
	n, err := netpolicy.NormalizeHost(host)
	if err != nil {
		return hostPort{}, fmt.Errorf("invalid host %q: %v", s, err)
	}
	return hostPort{canonHost(n), port}, nil
}

// canonHost spells an IP literal one way: an IPv4-mapped IPv6 address as
// its IPv4 form, the zone dropped. The threat: the agent asking for a
// declared server's address as [::ffff:a.b.c.d], which the allowlist
// admits by address, to get past a comparison of spellings.
func canonHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return h
}

// ParseScopeClaim reads a [HeaderScope] value: "server=NAME; tool=TOOL"
// (tool optional: the connect-time tool-list check has none).
func ParseScopeClaim(v string) (server, tool string, err error) {
	for _, part := range strings.Split(v, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return "", "", fmt.Errorf("malformed scope %q: want \"server=NAME; tool=TOOL\"", truncate(v, 200))
		case k == "server" && server == "" && serverNameRE.MatchString(val):
			server = val
		case k == "tool" && tool == "" && toolNameRE.MatchString(val):
			tool = val
		default:
			return "", "", fmt.Errorf("malformed scope %q: want \"server=NAME; tool=TOOL\"", truncate(v, 200))
		}
	}
	if server == "" {
		return "", "", fmt.Errorf("malformed scope %q: no server", truncate(v, 200))
	}
	return server, tool, nil
}

// ScopeRequest is what a scope is judged on.
type ScopeRequest struct {
	// FromSidecar says the client's source address is the sidecar's.
	FromSidecar bool
	// Claim is the [HeaderScope] value; Claimed says the header was sent
	// (once: a repeated header is a malformed claim).
	Claim   string
	Claimed bool
	Host    string // normalised
	Port    uint16
}

// ScopeVerdict is the scope a request was judged under and, when it is
// refused, why. An allowed request still goes through the allowlist.
type ScopeVerdict struct {
	Scope  Scope
	Allow  bool
	Reason string
}

// Judge is the scope decision table (docs/egress.md):
//
//	claim   source    destination            verdict
//	none    agent     a server's host        deny (only the sidecar reaches MCP servers)
//	none    agent     anything else          allow (the allowlist decides)
//	none    sidecar   anything               deny (the sidecar always names its server)
//	bad     any       anything               deny (malformed scope)
//	valid   agent     anything               deny (impersonation: the claim is not the sidecar's)
//	valid   sidecar   unknown server         deny
//	valid   sidecar   that server's host     allow (its declared port only)
//	valid   sidecar   any other host         deny (outside the server's scope)
func (s *Scoper) Judge(r ScopeRequest) ScopeVerdict {
	dest := hostPort{canonHost(r.Host), r.Port}
	if !r.Claimed {
		if r.FromSidecar {
			return ScopeVerdict{Scope{Role: RoleSidecar}, false, "the sidecar sent no " + HeaderScope + ": every sidecar request names the server it acts for"}
		}
		// Every port of a server's host is the server's: a server declared
		// at mcp.example.com:443 does not leave mcp.example.com:80 to the
		// agent.
		if slices.ContainsFunc(s.all, func(hp hostPort) bool { return hp.host == dest.host }) {
			return ScopeVerdict{Scope{Role: RoleAgent}, false, fmt.Sprintf("%s is a declared MCP server's host (any port): only the sidecar reaches it, under that server's scope", hostPortString(dest))}
		}
		return ScopeVerdict{Scope{Role: RoleAgent}, true, ""}
	}
	server, tool, err := ParseScopeClaim(r.Claim)
	if err != nil {
		role := RoleAgent
		if r.FromSidecar {
			role = RoleSidecar
		}
		return ScopeVerdict{Scope{Role: role}, false, err.Error()}
	}
	sc := Scope{Role: RoleSidecar, Server: server, Tool: tool}
	if !r.FromSidecar {
		return ScopeVerdict{Scope{Role: RoleAgent, Server: server, Tool: tool}, false,
			fmt.Sprintf("scope impersonation: a client that is not the sidecar (%s) claimed server %q's scope", s.sidecarHost, server)}
	}
	hosts, ok := s.servers[server]
	if !ok {
		return ScopeVerdict{sc, false, fmt.Sprintf("unknown server %q in the scope claim", server)}
	}
	if !slices.Contains(hosts, dest) {
		return ScopeVerdict{sc, false, fmt.Sprintf("%s is outside server %q's scope (%s)", hostPortString(dest), server, joinHostPorts(hosts))}
	}
	return ScopeVerdict{sc, true, ""}
}

func hostPortString(hp hostPort) string {
	return net.JoinHostPort(hp.host, strconv.Itoa(int(hp.port)))
}

func joinHostPorts(hps []hostPort) string {
	s := make([]string, len(hps))
	for i, hp := range hps {
		s[i] = hostPortString(hp)
	}
	return strings.Join(s, ", ")
}

// IsSidecar reports whether client (the connection's remote ip:port) is
// the sidecar, by its alias's current addresses. A failed lookup is
// "not the sidecar": fail closed.
func (s *Scoper) IsSidecar(ctx context.Context, client string) bool {
	ap, err := netip.ParseAddrPort(client)
	if err != nil {
		return false
	}
	for _, a := range s.sidecarAddrs(ctx) {
		if a.Unmap() == ap.Addr().Unmap() {
			return true
		}
	}
	return false
}

func (s *Scoper) sidecarAddrs(ctx context.Context) []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.addrs) > 0 && time.Since(s.fetched) < sidecarAddrTTL {
		return s.addrs
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := s.lookup(ctx, s.sidecarHost)
	if err != nil {
		return nil
	}
	s.addrs, s.fetched = addrs, time.Now()
	return addrs
}
