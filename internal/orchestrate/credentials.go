package orchestrate

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/agentenv"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Host variables of openai_agents' default credential.
const (
	envOpenAIKey     = agentenv.APIKey // the agent's variables (internal/agent owns them)
	envOpenAIBaseURL = agentenv.BaseURL
	defaultOpenAIURL = "https://api.openai.com/v1"
)

// NoteSquidCredentials is the degradation recorded when the Squid engine
// runs a spec whose credentials the gateway would hold.
const NoteSquidCredentials = "the Squid gateway engine cannot hold credentials (adding a header to an HTTPS request would mean terminating its TLS): "

// CredentialEnv is what one run's credentials put in each role's
// environment.
type CredentialEnv struct {
	// Gateway holds the routes (no values), the placeholder and, secret,
	// each real value; Agent the placeholder in each credential's own
	// variable, OPENAI_BASE_URL pointing at the credential listener, or
	// (credentials in the sandbox) the real values.
	Gateway, Agent []dockerx.EnvVar
	// Secrets are the real values, for redaction from every artifact.
	Secrets []string
	// Degradations are recorded in run-metadata.json.
	Degradations []string
	// Where says where each credential lived, for the record.
	Where []CredentialPlace
}

// CredentialPlace is one credential of a run and where it lived.
type CredentialPlace struct {
	Variable string `json:"variable"`
	Host     string `json:"host"`
	Lives    string `json:"lives"` // spec.LivesGateway or spec.LivesSandbox
}

// NewPlaceholder is a per-run random placeholder: it is worthless outside
// the run, and long enough that it cannot be guessed inside it.
func NewPlaceholder() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "mcpsidecar-placeholder-" + hex.EncodeToString(b)
}

// Credentials decides, at run time, the environment that carries the
// profile's credentials. getenv reads the host's variables; the default
// credential's host, port, scheme and path come from the host's
// OPENAI_BASE_URL (OpenAI's API when unset), so a run against another
// OpenAI-compatible server injects the key there, and nowhere else.
func Credentials(p *spec.Profile, engine string, getenv func(string) string, placeholder string) (CredentialEnv, error) {
	var ce CredentialEnv
	var routes []spec.GatewayCredential
	seen := map[string]string{}
	for _, c := range p.Credentials {
		value := getenv(c.FromHost)
		if value != "" {
			ce.Secrets = append(ce.Secrets, value)
		}
		lives := c.Lives
		if lives == spec.LivesGateway && engine == EngineSquid {
			lives = spec.LivesSandbox
			ce.Degradations = append(ce.Degradations, NoteSquidCredentials+"the real "+c.FromHost+" is in the agent's environment")
		}
		route, agentURL, err := route(c.Credential, getenv)
		if err != nil {
			return CredentialEnv{}, err
		}
		// The spec refuses two credentials for one host; the default's
		// host is only known now, so the check is repeated here.
		if other, dup := seen[hostOf(route)]; dup {
			return CredentialEnv{}, fmt.Errorf("credentials %s and %s would both be sent to %s: a host takes one credential", other, c.FromHost, hostOf(route))
		}
		seen[hostOf(route)] = c.FromHost
		ce.Where = append(ce.Where, CredentialPlace{Variable: c.FromHost, Host: hostOf(route), Lives: lives})
		switch {
		case lives == spec.LivesSandbox && c.Lives == spec.LivesGateway:
			// The spec put it in the gateway, so the profile does not
			// forward it: forward it here (Squid).
			ce.Agent = append(ce.Agent, forwarded(c.FromHost, value, true)...)
			if c.Default {
				ce.Agent = append(ce.Agent, forwarded(envOpenAIBaseURL, getenv(envOpenAIBaseURL), false)...)
			}
		case lives == spec.LivesGateway:
			routes = append(routes, route)
			ce.Gateway = append(ce.Gateway, dockerx.EnvVar{Name: c.FromHost, Value: value, Secret: true})
			ce.Agent = append(ce.Agent, dockerx.EnvVar{Name: c.FromHost, Value: placeholder})
			if c.Default {
				ce.Agent = append(ce.Agent, dockerx.EnvVar{Name: envOpenAIBaseURL, Value: agentURL})
			}
		}
	}
	if len(routes) > 0 {
		js, err := json.Marshal(routes)
		if err != nil {
			return CredentialEnv{}, fmt.Errorf("encoding credential routes: %w", err)
		}
		ce.Gateway = append(ce.Gateway,
			dockerx.EnvVar{Name: spec.EnvGatewayCredentials, Value: string(js)},
			dockerx.EnvVar{Name: spec.EnvCredentialPlaceholder, Value: placeholder, Secret: true})
	}
	return ce, nil
}

func forwarded(name, value string, secret bool) []dockerx.EnvVar {
	if value == "" {
		return nil
	}
	return []dockerx.EnvVar{{Name: name, Value: value, Secret: secret}}
}

// route is the gateway's route for c and the base URL the agent uses to
// reach it through the credential listener.
func route(c spec.Credential, getenv func(string) string) (spec.GatewayCredential, string, error) {
	r := spec.GatewayCredential{Scheme: "https", Header: c.Header, Format: c.Format, FromEnv: c.FromHost}
	path := ""
	hostport := c.Host
	if c.Default {
		raw := getenv(envOpenAIBaseURL)
		if raw == "" {
			raw = defaultOpenAIURL
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
			return r, "", fmt.Errorf("%s %q: want an http(s) URL such as %s", envOpenAIBaseURL, raw, defaultOpenAIURL)
		}
		// An http:// base URL (a local server) is honoured as the user
		// wrote it: the key then crosses that hop in clear, as it did
		// when the agent held it.
		r.Scheme, hostport, path = u.Scheme, u.Host, strings.TrimSuffix(u.EscapedPath(), "/")
	}
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	r.Host = strings.Trim(host, "[]")
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return r, "", fmt.Errorf("credential for %s: invalid port %q", c.Host, port)
		}
		r.Port = uint16(n)
	}
	listener := "http://" + net.JoinHostPort(spec.GatewayAlias, strconv.Itoa(spec.CredentialPort))
	return r, listener + "/" + hostport + path, nil
}

func hostOf(r spec.GatewayCredential) string {
	if r.Port == 0 {
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port)))
}
