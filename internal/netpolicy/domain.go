package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DomainRule is one parsed allowed_domains entry, with Squid dstdomain
// semantics: Subdomains means ".name" (the name and every name under it);
// otherwise the rule matches Name only. Port, when set, is the one port
// the rule opens, for plain HTTP and CONNECT alike; a rule without a port
// opens the policy's default ports (HTTP 80 and 443, CONNECT 443).
type DomainRule struct {
	Name       string // lower-case ASCII (IDNA A-labels), no trailing dot
	Subdomains bool
	Port       uint16 // 0: the default ports
}

// String is the canonical spelling: ".example.com", "example.com", or
// either with ":PORT".
func (r DomainRule) String() string {
	s := r.Name
	if r.Subdomains {
		s = "." + s
	}
	if r.Port != 0 {
		s += ":" + strconv.Itoa(int(r.Port))
	}
	return s
}

// HostGateway is the name Docker gives the host a container runs on
// (ExtraHosts "host.docker.internal:host-gateway"). Only the gateway
// container resolves it, and an allowed_domains entry for it must name a
// port: "host.docker.internal:11434" lets the gateway dial the host's
// (private) bridge address on that port alone.
const HostGateway = "host.docker.internal"

// HostGatewayRule is the IP part of a decision's rule when the gateway
// dialled the Docker host through a [HostGateway] entry.
const HostGatewayRule = "host-gateway"

// Matches reports whether the normalised host name h falls under r.
func (r DomainRule) Matches(h string) bool {
	if h == r.Name {
		return true
	}
	return r.Subdomains && strings.HasSuffix(h, "."+r.Name)
}

// idnaProfile maps (lower-cases, folds full-width forms) and validates
// names the way a resolver would look them up, so the validator, the
// gateway's allowlist check and its DNS query all see the same name.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
	idna.StrictDomainName(true),
	idna.ValidateLabels(true),
)

// ParseDomainRule parses one allowed_domains entry, optionally with a
// port ("models.lan:11434"). "*.x" is read as ".x", as Squid would. It
// rejects URLs, paths, bad ports, wildcards other than a leading "*.", IP
// addresses, loopback names (inside the sandbox they are the gateway
// itself), [HostGateway] without a port, and rules with a single label
// (".com" would be open egress in disguise).
func ParseDomainRule(s string) (DomainRule, error) {
	raw := strings.TrimSpace(s)
	if err := checkRuleShape(raw); err != nil {
		return DomainRule{}, err
	}
	if _, err := netip.ParseAddr(strings.Trim(raw, "[]")); err == nil {
		return DomainRule{}, fmt.Errorf("%q is an IP address; put it in allowed_ip_addresses", s)
	}
	raw, port, err := cutRulePort(s, raw)
	if err != nil {
		return DomainRule{}, err
	}
	if _, err := netip.ParseAddr(raw); err == nil {
		return DomainRule{}, fmt.Errorf("%q is an IP address; put it in allowed_ip_addresses", s)
	}
	r, err := parseDomainName(s, raw)
	if err != nil {
		return DomainRule{}, err
	}
	r.Port = port
	if r.Name == HostGateway && (port == 0 || r.Subdomains) {
		return DomainRule{}, fmt.Errorf("%q: the Docker host is reachable only on a port you name: write \"%s:PORT\"", s, HostGateway)
	}
	return r, nil
}

// cutRulePort splits "name:port" (raw has at most one colon by now).
func cutRulePort(entry, raw string) (string, uint16, error) {
	name, p, ok := strings.Cut(raw, ":")
	if !ok {
		return raw, 0, nil
	}
	port, err := ParsePort(p)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", entry, err)
	}
	return name, port, nil
}

// ParsePort parses the port of an allowlist entry: decimal, 1 to 65535.
func ParsePort(p string) (uint16, error) {
	switch n, err := strconv.ParseUint(p, 10, 64); {
	case p == "":
		return 0, errors.New("the port after ':' is empty")
	case strings.Trim(p, "0123456789") != "":
		return 0, fmt.Errorf("port %q is not a number", p)
	case err != nil || n > 65535:
		return 0, fmt.Errorf("port %s is out of range (1 to 65535)", p)
	case n == 0:
		return 0, errors.New("port 0 is not a port")
	default:
		return uint16(n), nil
	}
}

// loopbackNames are names every resolver answers with a loopback address
// (RFC 6761 and the usual /etc/hosts aliases).
var loopbackNames = []string{"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}

func isLoopbackName(name string) bool {
	return slices.Contains(loopbackNames, name) || strings.HasSuffix(name, ".localhost")
}

// parseDomainName reads the name part of a rule: a leading "*." or ".",
// then a host name.
func parseDomainName(s, raw string) (DomainRule, error) {
	var r DomainRule
	switch {
	case strings.HasPrefix(raw, "*."):
		r.Subdomains, raw = true, raw[2:]
	case strings.HasPrefix(raw, "."):
		r.Subdomains, raw = true, raw[1:]
	}
	name, err := normalizeName(raw)
	if err != nil {
		return DomainRule{}, err
	}
	if isLoopbackName(name) {
		// The threat is only confusion: inside the sandbox a loopback name
		// is the gateway container itself, never the user's machine.
		return DomainRule{}, fmt.Errorf("%q names the loopback interface, which inside the sandbox is the gateway container, not your machine; to reach a server on the Docker host write \"%s:PORT\"", s, HostGateway)
	}
	if !strings.Contains(name, ".") {
		return DomainRule{}, fmt.Errorf("%q is a bare top-level name; it would allow a whole TLD, name a registered domain such as \".example.com\"", s)
	}
	r.Name = name
	return r, nil
}

// checkRuleShape rejects the spellings that are clearly not a domain rule,
// with a message that says what they look like instead.
func checkRuleShape(raw string) error {
	switch {
	case raw == "":
		return errors.New("domain rule is empty")
	case raw == "*" || raw == "." || raw == "*.":
		return fmt.Errorf("%q would allow every domain; list the domains the sandbox needs", raw)
	case strings.Contains(raw, "://"):
		return fmt.Errorf("%q is a URL; write only the host name, e.g. \".example.com\"", raw)
	case strings.ContainsAny(raw, "/?#"):
		return fmt.Errorf("%q contains a path; write only the host name", raw)
	case strings.Contains(raw, "@"):
		return fmt.Errorf("%q contains user information; write only the host name", raw)
	case strings.HasPrefix(raw, "["), strings.Count(raw, ":") > 1:
		return fmt.Errorf("%q is an IP address; put it in allowed_ip_addresses", raw)
	case strings.Contains(strings.TrimPrefix(raw, "*."), "*"):
		return fmt.Errorf("%q has a wildcard that is not a leading \"*.\"", raw)
	}
	return nil
}

// NormalizeHost normalises a request target's host the same way rules are
// normalised: lower-case, IDNA A-labels, no trailing dot. IP literals come
// back in canonical form (IPv6 without brackets). Spellings that a C
// resolver would read as an IPv4 address but netip would not (decimal
// "2130706433", octal "0177.0.0.1", hex "0x7f.1", short "127.1") are
// rejected: the threat is a name check passing for what the dialer then
// treats as a loopback or metadata address.
func NormalizeHost(host string) (string, error) {
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
		if a, err := parseCanonicalAddr(h); err == nil && a.Is6() {
			return a.String(), nil
		}
		return "", fmt.Errorf("host %q: brackets must hold an IPv6 address", host)
	}
	if strings.Contains(h, ":") {
		a, err := parseCanonicalAddr(h)
		if err != nil {
			return "", fmt.Errorf("host %q: %w", host, err)
		}
		return a.String(), nil
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String(), nil
	}
	name, err := normalizeName(h)
	if err != nil {
		return "", fmt.Errorf("host %q: %w", host, err)
	}
	return name, nil
}

// normalizeName turns a host name (no IP literal) into its canonical
// lower-case ASCII form, stripping one trailing dot.
func normalizeName(s string) (string, error) {
	if s == "" {
		return "", errors.New("name is empty")
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("name %q is not valid UTF-8", s)
	}
	ascii, err := idnaProfile.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("invalid name %q: %w", s, err)
	}
	// A-labels must decode back to valid labels, so the name the gateway
	// checks is one it can also normalise again.
	if _, err := idnaProfile.ToUnicode(ascii); err != nil {
		return "", fmt.Errorf("invalid name %q: %w", s, err)
	}
	// One trailing dot is the same (fully qualified) name; the mapping
	// runs first so that a full-width dot counts as a dot.
	ascii = strings.TrimSuffix(ascii, ".")
	if err := checkLabels(ascii); err != nil {
		return "", fmt.Errorf("invalid name %q: %w", s, err)
	}
	if looksNumeric(ascii) {
		return "", fmt.Errorf("%q is not a canonical IPv4 address and not a host name (numeric last label); write dotted decimal like 192.0.2.1", s)
	}
	return ascii, nil
}

// checkLabels enforces DNS letter-digit-hyphen syntax and lengths after
// IDNA mapping, so nothing odd reaches a resolver or a Squid config.
func checkLabels(name string) error {
	if len(name) > 253 {
		return errors.New("name is longer than 253 characters")
	}
	for _, l := range strings.Split(name, ".") {
		if err := checkLabel(l); err != nil {
			return err
		}
	}
	return nil
}

func checkLabel(l string) error {
	switch {
	case l == "":
		return errors.New("empty label")
	case len(l) > 63:
		return fmt.Errorf("label %q is longer than 63 characters", l)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Errorf("label %q starts or ends with a hyphen", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("label %q has character %q", l, c)
		}
	}
	return nil
}

// looksNumeric reports whether the last label is all digits or a 0x hex
// number: per the WHATWG URL standard such a host is an IPv4 address, and
// inet_aton would parse it as one.
func looksNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		last = last[2:]
		return strings.Trim(last, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}
