package spec

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/agentenv"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// Credentials are held by the gateway and added on the way out, so the
// workload holds only a per-run placeholder. The threat: a workload that
// reads its own environment (a prompt injection is enough) sends a real
// key anywhere the allowlist reaches, or prints it into an answer.

// Spec keys of [[credentials]] and the opt-out.
const (
	keyCreds          = "credentials"
	keyCredsInSandbox = "credentials_in_sandbox"
	keyCredHost       = "host"
	keyCredHeader     = "header"
	keyCredFormat     = "format"
	keyCredFrom       = "from_host"
)

var credKeys = []string{keyCredFormat, keyCredFrom, keyCredHeader, keyCredHost}

// ValueToken is where a credential's value goes in its [Credential.Format].
const ValueToken = "{value}"

// Environment the harness sets for the credential listener.
const (
	// EnvGatewayCredentials is the gateway's credential routes, JSON
	// [[]GatewayCredential]; it names host variables, never values.
	EnvGatewayCredentials = "MCPSIDECAR_GATEWAY_CREDENTIALS"
	// EnvCredentialPlaceholder is the run's placeholder (gateway only;
	// the agent gets it in each credential's own variable).
	EnvCredentialPlaceholder = "MCPSIDECAR_CREDENTIAL_PLACEHOLDER"
	// CredentialPort is the gateway's credential listener.
	CredentialPort = 3129
)

// Where a credential lives, in [ResolvedCredential.Lives].
const (
	LivesGateway = "gateway"
	LivesSandbox = "sandbox"
)

// Credential is one [[credentials]] entry: the secret in host variable
// FromHost goes in Header, formatted by Format, to Host and no other.
type Credential struct {
	Host     string `json:"host"`
	Header   string `json:"header"`
	Format   string `json:"format"`
	FromHost string `json:"from_host"`
	// Default marks openai_agents' own credential, whose host the
	// harness takes from the host's OPENAI_BASE_URL at run time.
	Default bool `json:"default,omitempty"`
}

// ResolvedCredential is a credential and where it lives in a run.
type ResolvedCredential struct {
	Credential
	Lives string `json:"lives"` // LivesGateway or LivesSandbox
	Why   string `json:"why"`
}

// GatewayCredential is one entry of [EnvGatewayCredentials]: the contract
// between the harness, which writes it, and the gateway command.
type GatewayCredential struct {
	Host    string `json:"host"`
	Port    uint16 `json:"port,omitempty"`
	Scheme  string `json:"scheme"`
	Header  string `json:"header"`
	Format  string `json:"format"`
	FromEnv string `json:"from_env"` // the gateway's variable holding the value
}

// openAICredential is what openai_agents declares by default.
func openAICredential() Credential {
	return Credential{Host: "api.openai.com", Header: "Authorization", Format: "Bearer " + ValueToken,
		FromHost: agentenv.APIKey, Default: true}
}

// credEntry is one [[credentials]] table as written.
type credEntry struct {
	at     pos
	index  int
	fields map[string]*item
}

func (e *credEntry) path(key string) string { return entryPath(keyCreds, e.index, key) }

func (w *walker) credKey(e *credEntry, parts []string, at pos, v *unstable.Node) {
	key := joinKey(parts)
	switch {
	case len(parts) == 1 && slices.Contains(topKeys, key):
		w.add(at, e.path(key), "unknown key; top-level keys must come before the first [[credentials]]")
		return
	case len(parts) != 1:
		w.add(at, e.path(key), "unknown key; supported keys: %s", strings.Join(credKeys, ", "))
		return
	case !w.known(key, at, e.path(key), credKeys):
		return
	}
	vat := w.pos(v, at)
	if v.Kind != unstable.String {
		w.add(vat, e.path(key), "must be a string, not %s", kindName(v))
		return
	}
	e.fields[key] = &item{string(v.Data), vat, e.path(key)}
}

func (w *walker) credsInSandbox(at pos, v *unstable.Node) {
	if v.Kind != unstable.Bool {
		w.add(w.pos(v, at), keyCredsInSandbox, "must be true or false, not %s", kindName(v))
		return
	}
	w.spec.CredentialsInSandbox = string(v.Data) == "true"
}

// headerNameRE is an HTTP header field name (RFC 9110 token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// refusedHeaders cannot carry a credential: hop-by-hop headers never
// reach the upstream, and the others would redirect or confuse the request.
var refusedHeaders = []string{"Connection", "Content-Length", "Host", "Keep-Alive", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Traceparent"}

// formatRE is a header value with one {value}: printable ASCII only.
var formatRE = regexp.MustCompile(`^[\x20-\x7e]*$`)

// checkCreds validates each entry and copies the valid ones into the
// spec. It runs after the allowlists are known.
func (w *walker) checkCreds() {
	if len(w.creds) > 0 && !w.spec.Has(CapNetwork) {
		w.add(w.creds[0].at, keyCreds, "requires the network capability (credentials are added by the egress gateway)")
		return
	}
	pol := w.credPolicy()
	hosts := map[string]pos{}
	vars := map[string]pos{}
	for _, e := range w.creds {
		c, ok := w.checkCred(e, pol)
		if !ok {
			continue
		}
		if p, dup := hosts[c.Host]; dup {
			w.add(e.fields[keyCredHost].at, e.path(keyCredHost), "duplicate credential host %q (first declared at line %d): a host takes one credential", c.Host, p.line)
			continue
		}
		if p, dup := vars[c.FromHost]; dup {
			w.add(e.fields[keyCredFrom].at, e.path(keyCredFrom), "host variable %q already feeds the credential at line %d: a secret goes to one host", c.FromHost, p.line)
			continue
		}
		hosts[c.Host], vars[c.FromHost] = e.at, e.at
		w.spec.Credentials = append(w.spec.Credentials, c)
	}
}

func (w *walker) checkCred(e *credEntry, pol *netpolicy.Policy) (Credential, bool) {
	for _, k := range credKeys {
		if e.fields[k] == nil {
			w.add(e.at, e.path(""), "missing %s (a credential needs host, header, format and from_host)", k)
			return Credential{}, false
		}
	}
	ok := true
	fail := func(k, format string, args ...any) {
		w.add(e.fields[k].at, e.path(k), format, args...)
		ok = false
	}
	host, port, err := credHost(e.fields[keyCredHost].val)
	if err != nil {
		fail(keyCredHost, "%v", err)
	} else if pol != nil {
		if _, allowed := pol.Allows(host, port, true); !allowed {
			fail(keyCredHost, "host %q is not allowed by allowed_domains/allowed_ip_addresses (HTTPS to port %d): a credential goes only to an allowed host", e.fields[keyCredHost].val, port)
		}
	}
	h := e.fields[keyCredHeader].val
	if !headerNameRE.MatchString(h) || strings.HasPrefix(http.CanonicalHeaderKey(h), "Proxy-") || slices.Contains(refusedHeaders, http.CanonicalHeaderKey(h)) {
		fail(keyCredHeader, "header %q cannot carry a credential (a header name, not Proxy-*, hop-by-hop, Host or Traceparent)", h)
	}
	f := e.fields[keyCredFormat].val
	if strings.Count(f, ValueToken) != 1 || !formatRE.MatchString(f) || strings.ContainsAny(strings.ReplaceAll(f, ValueToken, ""), "{}") {
		fail(keyCredFormat, "unknown header format %q: write the header's value with %s once where the secret goes, e.g. \"Bearer %s\"", f, ValueToken, ValueToken)
	}
	v := e.fields[keyCredFrom].val
	if !envNameRE.MatchString(v) {
		fail(keyCredFrom, "invalid variable name %q: use letters, digits and _, not starting with a digit", v)
	}
	c := Credential{Host: e.fields[keyCredHost].val, Header: http.CanonicalHeaderKey(h), Format: f, FromHost: v}
	if err == nil {
		c.Host = hostPort(host, port)
	}
	return c, ok
}

// credPolicy compiles the spec's allowlist as the gateway will see it, or
// nil when it is itself invalid (already reported).
func (w *walker) credPolicy() *netpolicy.Policy {
	domains := slices.Clone(w.spec.AllowedDomains)
	if w.spec.Has(CapOpenAIAgents) {
		domains = append(domains, openAIDomain)
	}
	cfg, err := GatewayConfig(domains, w.spec.AllowedIPs)
	if err != nil {
		return nil
	}
	p, err := netpolicy.Compile(cfg)
	if err != nil {
		return nil
	}
	return p
}

// credHost parses "name" or "name:port" (HTTPS; 443 when absent).
func credHost(s string) (string, uint16, error) {
	host, port := s, uint16(443)
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.ParseUint(p, 10, 16)
		if perr != nil || n == 0 {
			return "", 0, fmt.Errorf("invalid port %q in credential host %q", p, s)
		}
		host, port = h, uint16(n)
	}
	if strings.ContainsAny(host, "/*@ ") || strings.HasPrefix(host, ".") {
		return "", 0, fmt.Errorf("invalid credential host %q: name one host (\"api.example.com\" or \"api.example.com:8443\"), not a URL or a wildcard", s)
	}
	n, err := netpolicy.NormalizeHost(host)
	if err != nil {
		return "", 0, fmt.Errorf("invalid credential host %q: %v", s, err)
	}
	return n, port, nil
}

func hostPort(host string, port uint16) string {
	if port == 443 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// credentials are the spec's credentials plus openai_agents' default (a
// declared credential reading OPENAI_API_KEY replaces it), each with where
// it lives: in the gateway, unless credentials_in_sandbox asks otherwise.
func credentials(s *Spec) []ResolvedCredential {
	var all []Credential
	def := openAICredential()
	if s.Has(CapOpenAIAgents) && !slices.ContainsFunc(s.Credentials, func(c Credential) bool { return c.FromHost == def.FromHost }) {
		all = append(all, def)
	}
	all = append(all, s.Credentials...)
	out := make([]ResolvedCredential, 0, len(all))
	for _, c := range all {
		r := ResolvedCredential{Credential: c, Lives: LivesGateway,
			Why: fmt.Sprintf("the gateway holds %s and sets %s on requests to %s; the agent's %s is a per-run placeholder", c.FromHost, c.Header, c.Host, c.FromHost)}
		if c.Default {
			r.Why += " (the host is OPENAI_BASE_URL's when set on the host, at run time)"
		}
		if s.CredentialsInSandbox {
			r.Lives, r.Why = LivesSandbox, fmt.Sprintf("credentials_in_sandbox = true: the agent gets the real %s", c.FromHost)
		}
		out = append(out, r)
	}
	return out
}
