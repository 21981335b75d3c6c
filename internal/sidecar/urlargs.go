package sidecar

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// URL-typed arguments of a declared server's tools are checked against
// that server's own host before anything is sent: the generalisation of
// microsoft_docs_fetch's check. The threat: a tool that takes a URL lets
// the agent (or a prompt injection steering it) make the server fetch an
// attacker-chosen host, or smuggle data out in the URL; and a server that
// follows it would act outside the scope the spec gave it.
//
// An argument is URL-typed when its schema says "format": "uri" (or
// "url", "iri", "uri-reference", "iri-reference"), or when its name is
// url or uri or ends in _url, _uri, Url or Uri. Such a value must be an
// absolute URL with the server's own scheme (https, or http for a server
// declared on plain http), host and port, without credentials.

var urlFormats = []string{"uri", "url", "iri", "uri-reference", "iri-reference"}

// urlArgNames returns the URL-typed argument names of a tool's schema.
func urlArgNames(schema any) []string {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var s struct {
		Properties map[string]struct {
			Format string `json:"format"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var out []string
	for name, p := range s.Properties {
		if contains(urlFormats, strings.ToLower(p.Format)) || isURLName(name) {
			out = append(out, name)
		}
	}
	return out
}

func isURLName(n string) bool {
	l := strings.ToLower(n)
	return l == "url" || l == "uri" || strings.HasSuffix(l, "_url") || strings.HasSuffix(l, "_uri") ||
		strings.HasSuffix(n, "Url") || strings.HasSuffix(n, "Uri") || strings.HasSuffix(n, "URL")
}

// checkURLArgs checks every URL-typed argument of tool present in args
// against serverURL's scheme, host and port.
func checkURLArgs(tool string, schema any, args map[string]any, serverURL string) error {
	server, err := url.Parse(serverURL)
	if err != nil {
		return fmt.Errorf("%s: server url %q: %v", tool, serverURL, err)
	}
	for _, name := range urlArgNames(schema) {
		v, ok := args[name]
		if !ok || v == nil {
			continue
		}
		raw, isString := v.(string)
		if !isString {
			return fmt.Errorf("%s: argument %s must be a URL string", tool, name)
		}
		if err := checkURLArg(raw, server); err != nil {
			return fmt.Errorf("%s: refusing argument %s=%q: %v", tool, name, raw, err)
		}
	}
	return nil
}

func checkURLArg(raw string, server *url.URL) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return fmt.Errorf("not an absolute URL")
	}
	if u.User != nil {
		return fmt.Errorf("credentials in URLs are not allowed")
	}
	if !strings.EqualFold(u.Scheme, server.Scheme) {
		return fmt.Errorf("only %s URLs on the server's own host are accepted (scheme is %q)", server.Scheme, u.Scheme)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	want := strings.TrimSuffix(strings.ToLower(server.Hostname()), ".")
	if host != want {
		return fmt.Errorf("only URLs on the server's own host %s are accepted (host is %q)", want, host)
	}
	if effectivePort(u) != effectivePort(server) {
		return fmt.Errorf("only the server's own port %s is accepted (port is %s)", effectivePort(server), effectivePort(u))
	}
	return nil
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "http") {
		return "80"
	}
	return "443"
}
