//go:build linux

package egress

import (
	"bufio"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

const (
	testPlaceholder = "mcpsidecar-placeholder-0123456789abcdef"
	testSecret      = "sk-real-secret-value"
)

// injectHarness is a gateway with a credential listener on 127.0.0.1:0.
type injectHarness struct {
	*harness
	credAddr string
}

// startInjector serves a gateway whose credential for example.com:port
// (the name httptest's certificate carries) goes to the upstream srv.
func startInjector(t testing.TB, srv *httptest.Server, trust bool, scheme string) *injectHarness {
	t.Helper()
	u, _ := url.Parse(srv.URL)
	p, _ := strconv.Atoi(u.Port())
	port := uint16(p)
	cfg := netpolicy.NewConfig([]string{"example.com", ".allowed.test"}, []string{"127.0.0.1/32"})
	cfg.HTTPPorts = append(cfg.HTTPPorts, port)
	cfg.ConnectPorts = append(cfg.ConnectPorts, port)
	in := &Injection{Placeholder: testPlaceholder, Credentials: []Credential{{
		Host: "example.com", Port: port, Scheme: scheme, Header: "Authorization", Format: "Bearer {value}",
		Value: testSecret, Source: "OPENAI_API_KEY",
	}}}
	if trust && srv.TLS != nil {
		in.RootCAs = x509.NewCertPool()
		in.RootCAs.AddCert(srv.Certificate())
	}
	res := newResolver(map[string]string{"example.com": "127.0.0.1", "other.allowed.test": "127.0.0.1"})
	h := startGateway(t, cfg, res, true, func(o *Options) { o.Injection = in })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.g.ServeCredentials(ln)
	return &injectHarness{harness: h, credAddr: ln.Addr().String()}
}

// send makes one request to the credential listener.
func (h *injectHarness) send(path string, header http.Header) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.credAddr+path, strings.NewReader(`{"model":"m"}`))
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (h *injectHarness) authority(srv *httptest.Server) string {
	u, _ := url.Parse(srv.URL)
	return "example.com:" + u.Port()
}

// TestInjectReplacesCredential: the upstream sees the real credential,
// once, and no Proxy-* or hop-by-hop header; the decision line says the
// credential was injected, with the correlation id, and never the value.
func TestInjectReplacesCredential(t *testing.T) {
	srv, _, seen := upstream(t, true)
	h := startInjector(t, srv, true, "https")
	resp, body := h.send("/"+h.authority(srv)+"/v1/chat/completions?x=1", http.Header{
		"Authorization":       {"Bearer " + testPlaceholder},
		"Proxy-Authorization": {"Basic cHJveHk6c2VjcmV0"},
		"Connection":          {"X-Hop"},
		"X-Hop":               {"1"},
		"Keep-Alive":          {"timeout=5"},
		"Traceparent":         {testTraceparent},
	})
	if resp.StatusCode != 200 || body != "hello from upstream" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	got := <-seen
	if v := got.Values("Authorization"); !slices.Equal(v, []string{"Bearer " + testSecret}) {
		t.Errorf("upstream Authorization = %q, want the real credential once", v)
	}
	for _, k := range []string{"Proxy-Authorization", "X-Hop", "Keep-Alive"} {
		if v := got.Values(k); len(v) > 0 {
			t.Errorf("upstream received %s: %q", k, v)
		}
	}
	d := h.waitDecisions(1)[0]
	if d.Decision != Allow || d.Credential != CredentialInjected || d.CorrelationID != testTraceID ||
		d.Host != "example.com" || d.ResolvedIP != "127.0.0.1" || !strings.Contains(d.Rule, "credential:Authorization@") {
		t.Errorf("decision %+v", d)
	}
	if strings.Contains(h.log.String(), testSecret) || strings.Contains(h.log.String(), testPlaceholder) {
		t.Error("the decision log holds the credential or the placeholder")
	}
}

// TestInjectRefusals: a wrong, missing or doubled placeholder, and any
// host the credential does not name, are refused with a reason, logged,
// and never reach an upstream (or a resolver).
func TestInjectRefusals(t *testing.T) {
	srv, _, seen := upstream(t, true)
	bearer := http.Header{"Authorization": {"Bearer " + testPlaceholder}}
	tests := []struct {
		name   string
		path   string
		header http.Header
		status int
		reason string
		cred   string
	}{
		{"missing placeholder", "", http.Header{}, 401, "missing Authorization", CredentialRefused},
		{"wrong placeholder", "", http.Header{"Authorization": {"Bearer " + testSecret}}, 403, "does not carry the run's placeholder", CredentialRefused},
		{"placeholder without format", "", http.Header{"Authorization": {testPlaceholder}}, 403, "does not carry the run's placeholder", CredentialRefused},
		{"two values", "", http.Header{"Authorization": {"Bearer " + testPlaceholder, "Bearer x"}}, 403, "does not carry", CredentialRefused},
		{"other allowed host", "/other.allowed.test/v1/x", bearer, 403, "no credential is declared for other.allowed.test", ""},
		{"other port", "/example.com:1/v1/x", bearer, 403, "no credential is declared for example.com:1", ""},
		{"no host", "/v1/x", bearer, 403, "no credential is declared for v1", ""},
		{"upgrade", "", http.Header{"Authorization": {"Bearer " + testPlaceholder}, "Upgrade": {"websocket"}, "Connection": {"upgrade"}}, 403, "upgrade", CredentialRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startInjector(t, srv, true, "https")
			path := tc.path
			if path == "" {
				path = "/" + h.authority(srv) + "/v1/chat/completions"
			}
			resp, body := h.send(path, tc.header)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.reason) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, body, tc.status, tc.reason)
			}
			d := h.waitDecisions(1)[0]
			if d.Decision != Deny || !strings.Contains(d.Reason, tc.reason) || d.Credential != tc.cred {
				t.Errorf("decision %+v", d)
			}
			if l := h.res.looked(); len(l) > 0 {
				t.Errorf("looked up %v", l)
			}
		})
	}
	select {
	case <-seen:
		t.Error("a refused request reached the upstream")
	default:
	}
}

// TestProxyRefusesPlaceholder: the placeholder sent through the proxy
// port, to an allowed host, is refused and recorded.
func TestProxyRefusesPlaceholder(t *testing.T) {
	srv, port, seen := upstream(t, false)
	h := startInjector(t, srv, true, "https")
	resp, body, _, _ := h.raw(fmt.Sprintf("GET http://other.allowed.test:%d/ HTTP/1.1\r\nHost: other.allowed.test:%d\r\nX-Api-Key: %s\r\n\r\n", port, port, testPlaceholder))
	if resp.StatusCode != 403 || !strings.Contains(body, "placeholder") {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if d := h.waitDecisions(1)[0]; d.Decision != Deny || !strings.Contains(d.Reason, "placeholder") {
		t.Errorf("decision %+v", d)
	}
	select {
	case <-seen:
		t.Error("the placeholder reached an upstream")
	default:
	}
}

// TestInjectVerifiesTLS: an upstream whose certificate the gateway does
// not trust gets no request (and so never the credential).
func TestInjectVerifiesTLS(t *testing.T) {
	srv, _, seen := upstream(t, true)
	h := startInjector(t, srv, false, "https")
	resp, body := h.send("/"+h.authority(srv)+"/v1/models", http.Header{"Authorization": {"Bearer " + testPlaceholder}})
	if resp.StatusCode != 502 || !strings.Contains(body, "certificate") {
		t.Errorf("got %d %q, want 502 naming the certificate", resp.StatusCode, body)
	}
	select {
	case <-seen:
		t.Error("the upstream answered over unverified TLS")
	default:
	}
	if d := h.waitDecisions(1)[0]; d.Decision != Allow || !strings.Contains(d.Error, "certificate") {
		t.Errorf("decision %+v", d)
	}
}

// TestInjectStreams: each server-sent event reaches the client before
// the upstream writes the next one (no buffering in the gateway).
func TestInjectStreams(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(5 * time.Second):
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	h := startInjector(t, srv, true, "https")
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.credAddr+"/"+h.authority(srv)+"/v1/chat/completions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: event %d\n", i) {
			t.Fatalf("event %d: got %q, %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{} // the upstream writes the next event only now
	}
	if d := h.waitDecisions(1)[0]; d.Decision != Allow || d.BytesDown == 0 {
		t.Errorf("decision %+v", d)
	}
}

// TestInjectionValidation: a credential that could never be matched, or
// that names a header unfit to carry it, stops the gateway from starting.
func TestInjectionValidation(t *testing.T) {
	ok := Credential{Host: "api.openai.com", Scheme: "https", Header: "Authorization", Format: "Bearer {value}"}
	tests := []struct {
		name string
		in   Injection
		want string
	}{
		{"short placeholder", Injection{Placeholder: "x", Credentials: []Credential{ok}}, "at least 16"},
		{"no value token", Injection{Placeholder: testPlaceholder, Credentials: []Credential{{Host: "a.test", Scheme: "https", Header: "Authorization", Format: "Bearer"}}}, "exactly once"},
		{"proxy header", Injection{Placeholder: testPlaceholder, Credentials: []Credential{{Host: "a.test", Scheme: "https", Header: "Proxy-Authorization", Format: "{value}"}}}, "cannot carry"},
		{"scheme", Injection{Placeholder: testPlaceholder, Credentials: []Credential{{Host: "a.test", Scheme: "ftp", Header: "X", Format: "{value}"}}}, "scheme"},
		{"duplicate", Injection{Placeholder: testPlaceholder, Credentials: []Credential{ok, ok}}, "second credential"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := netpolicy.Compile(testConfig(false))
			_, err := New(Options{Policy: p, Log: NewDecisionLog(io.Discard), Injection: &tc.in})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestInjectRefusesEchoMethods: a method an API client does not send is
// refused on the credential listener before any lookup or upstream, so an
// upstream that echoes requests (TRACE) never sees the credential to hand
// it back. (Red-team TestRedteamCredentialTraceReflectsKey.)
func TestInjectRefusesEchoMethods(t *testing.T) {
	srv, _, seen := upstream(t, true)
	for _, m := range []string{"TRACE", "TRACK", "OPTIONS", "PROPFIND", "DEBUG"} {
		t.Run(m, func(t *testing.T) {
			h := startInjector(t, srv, true, "https")
			req, _ := http.NewRequest(m, "http://"+h.credAddr+"/"+h.authority(srv)+"/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+testPlaceholder)
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || strings.Contains(string(b), testSecret) {
				t.Errorf("got %d %q, want 405 without the credential", resp.StatusCode, b)
			}
			if d := h.waitDecisions(1)[0]; d.Decision != Deny || !strings.Contains(d.Reason, "is refused on the credential listener") {
				t.Errorf("decision %+v", d)
			}
			if l := h.res.looked(); len(l) > 0 {
				t.Errorf("looked up %v", l)
			}
		})
	}
	select {
	case <-seen:
		t.Error("a refused method reached the upstream")
	default:
	}
}

// TestProxyRefusesPlaceholderInURL: the placeholder in a path or a query,
// plain or percent-encoded, is refused on the proxy port like one in a
// header; and TRACE is refused there too.
func TestProxyRefusesPlaceholderInURL(t *testing.T) {
	srv, port, seen := upstream(t, false)
	enc := strings.ReplaceAll(testPlaceholder, "-", "%2D")
	for name, tc := range map[string]struct{ method, target, reason string }{
		"path":          {"GET", "/x/" + testPlaceholder, "placeholder"},
		"query":         {"GET", "/?k=" + testPlaceholder, "placeholder"},
		"encoded path":  {"GET", "/x/" + enc, "placeholder"},
		"encoded query": {"GET", "/?k=" + enc, "placeholder"},
		"trace":         {"TRACE", "/", "TRACE is refused"},
	} {
		t.Run(name, func(t *testing.T) {
			h := startInjector(t, srv, true, "https")
			resp, body, _, _ := h.raw(fmt.Sprintf("%s http://other.allowed.test:%d%s HTTP/1.1\r\nHost: other.allowed.test:%d\r\n\r\n", tc.method, port, tc.target, port))
			if resp.StatusCode < 400 || !strings.Contains(body, tc.reason) {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
			if d := h.waitDecisions(1)[0]; d.Decision != Deny || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("decision %+v", d)
			}
		})
	}
	select {
	case <-seen:
		t.Error("a refused request reached an upstream")
	default:
	}
}
