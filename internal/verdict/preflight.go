package verdict

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// HostError is a preflight failure with the one hint that applies to it,
// for the CLI to print after the error.
type HostError struct {
	Err  error
	Hint string
}

func (e *HostError) Error() string { return e.Err.Error() }
func (e *HostError) Unwrap() error { return e.Err }

// CheckHost is the host-side preflight for the openai_agents capability,
// run before anything is created: OPENAI_API_KEY must be set, and the
// host and port of OPENAI_BASE_URL (default OpenAI's) must be allowed by
// gw, the run's gateway policy, or the agent could never reach its model.
// Each failure is a [HostError] whose hint names the exact fix: the
// allowlist entry to add (with its port when not 80/443), or
// host.docker.internal for a server on this machine. The key's value never
// appears in an error.
func CheckHost(gw *netpolicy.Config, getenv func(string) string) error {
	if getenv(agent.EnvAPIKey) == "" {
		return &HostError{fmt.Errorf("%s is not set in the host environment; the openai_agents capability forwards it to the agent", agent.EnvAPIKey),
			"export " + agent.EnvAPIKey + " (any non-empty value for a local server that needs none), or check the sandbox without a model: mcpsidecar doctor"}
	}
	raw := cmp.Or(getenv(agent.EnvBaseURL), agent.DefaultBaseURL)
	if err := agent.CheckHTTPURL(raw); err != nil {
		return &HostError{fmt.Errorf("%s: %w", agent.EnvBaseURL, err), "set " + agent.EnvBaseURL + " to the server's /v1 URL, e.g. https://api.openai.com/v1 or http://host.docker.internal:11434/v1"}
	}
	u, _ := url.Parse(raw)
	port, err := urlPort(u)
	if err != nil {
		return &HostError{fmt.Errorf("%s: %w", agent.EnvBaseURL, err), ""}
	}
	if isLoopback(u.Hostname()) {
		return &HostError{fmt.Errorf("%s host %q is the agent's own container, not this machine", agent.EnvBaseURL, u.Hostname()),
			fmt.Sprintf("for a server on this machine use %s://%s/v1 and add %q to allowed_domains; it must listen on an address the Docker bridge reaches (e.g. OLLAMA_HOST=0.0.0.0)",
				u.Scheme, net.JoinHostPort(netpolicy.HostGateway, strconv.Itoa(int(port))), net.JoinHostPort(netpolicy.HostGateway, strconv.Itoa(int(port))))}
	}
	if gw == nil {
		return &HostError{fmt.Errorf("the spec has no egress gateway, so the agent cannot reach %s", agent.DisplayHost(u)), "add the network capability to the spec"}
	}
	pol, err := netpolicy.Compile(*gw)
	if err != nil {
		return &HostError{fmt.Errorf("compiling the gateway policy: %w", err), ""}
	}
	if _, ok := pol.Allows(u.Hostname(), port, u.Scheme == "https"); !ok {
		return &HostError{fmt.Errorf("%s %s: the spec does not allow %s on port %d", agent.EnvBaseURL, raw, u.Hostname(), port),
			"add " + agent.SpecEntry(u) + " in the spec"}
	}
	return nil
}

// urlPort is u's port, or its scheme's default.
func urlPort(u *url.URL) (uint16, error) {
	if u.Port() == "" {
		if u.Scheme == "https" {
			return 443, nil
		}
		return 80, nil
	}
	p, err := netpolicy.ParsePort(u.Port())
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", u.Port(), err)
	}
	return p, nil
}

// isLoopback: a name or address that, inside the agent's container,
// means the container itself.
func isLoopback(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.IsLoopback() || a.IsUnspecified()
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "ip6-localhost" || h == "ip6-loopback"
}
