//go:build linux

package sidecar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// fwdProxy is a tiny forward proxy (absolute-form HTTP and CONNECT) for
// tests. It maps the names it is asked for to loopback addresses, so the
// sidecar can use a name under .test that nothing ever resolves.
type fwdProxy struct {
	route map[string]string // requested host:port -> loopback address

	mu   sync.Mutex
	seen []proxied
}

type proxied struct {
	method, host, traceparent string
	proxyHeaders              bool
}

func startProxy(t *testing.T, route map[string]string) (*fwdProxy, string) {
	p := &fwdProxy{route: route}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *fwdProxy) requests() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxied(nil), p.seen...)
}

func (p *fwdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if r.Method != http.MethodConnect && !strings.Contains(host, ":") {
		host += ":80"
	}
	p.mu.Lock()
	p.seen = append(p.seen, proxied{r.Method, host, r.Header.Get("Traceparent"), r.Header.Get("Proxy-Connection") != ""})
	p.mu.Unlock()
	dest, ok := p.route[host]
	if !ok {
		http.Error(w, "no route to "+host, http.StatusForbidden)
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, dest)
		return
	}
	out := r.Clone(r.Context())
	out.URL.Host, out.RequestURI = dest, ""
	resp, err := (&http.Transport{}).RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *fwdProxy) tunnel(w http.ResponseWriter, dest string) {
	up, err := net.Dial("tcp", dest)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() { _, _ = io.Copy(up, conn); up.Close() }()
	_, _ = io.Copy(conn, up)
	conn.Close()
}

// checkProxied wants every proxied request to carry a valid traceparent
// (the start-up tool check has its own trace-id) and at least one to carry
// the call's trace-id.
func checkProxied(t *testing.T, reqs []proxied, method, host, trace string) {
	t.Helper()
	var ours int
	for _, r := range reqs {
		if r.method != method || r.host != host || traceIDFromHeader(r.traceparent) == "" {
			t.Errorf("proxy saw %s %s traceparent %q, want %s %s with a traceparent", r.method, r.host, r.traceparent, method, host)
		}
		if traceIDFromHeader(r.traceparent) == trace {
			ours++
		}
	}
	if ours == 0 {
		t.Errorf("no proxied request carried the call's trace-id %s", trace)
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestUpstreamThroughHTTPProxy proves HTTP_PROXY is honoured for an http
// upstream and that each request carries the call's traceparent.
func TestUpstreamThroughHTTPProxy(t *testing.T) {
	fake, upURL := startFake(t, learnfake.Options{})
	u, _ := url.Parse(upURL)
	proxy, proxyURL := startProxy(t, map[string]string{"learn.test:80": u.Host})
	ts := startSidecar(t, Config{
		UpstreamURL: "http://learn.test/mcp",
		Proxy:       ProxyFromEnv(envOf(map[string]string{"HTTP_PROXY": proxyURL, "NO_PROXY": "mcp-sidecar,localhost"})),
	})
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	cs := connect(t, ts.URL, "00-"+trace+"-00f067aa0ba902b7-01")
	got, isErr := callText(t, cs, learn.ToolDocsSearch, map[string]any{"query": "HttpClient"})
	if isErr || !strings.Contains(got, "IHttpClientFactory") {
		t.Fatalf("search = %q (isError %v)", got, isErr)
	}
	reqs := proxy.requests()
	if len(reqs) == 0 {
		t.Fatal("the proxy saw no request: HTTP_PROXY was not honoured")
	}
	checkProxied(t, reqs, "POST", "learn.test:80", trace)
	if calls := fake.Calls(); len(calls) != 1 || traceIDFromHeader(calls[0].Traceparent) != trace {
		t.Errorf("upstream calls = %+v, want one with trace-id %s", calls, trace)
	}
}

// TestUpstreamThroughConnectProxy proves HTTPS_PROXY is honoured for an
// https upstream (CONNECT tunnel, TLS inside) and that every CONNECT carries
// the traceparent of the call that caused it.
func TestUpstreamThroughConnectProxy(t *testing.T) {
	fake := learnfake.New(learnfake.Options{})
	srv := httptest.NewTLSServer(fake.Handler())
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	proxy, proxyURL := startProxy(t, map[string]string{"learn.test:443": srv.Listener.Addr().String()})
	ts := startSidecar(t, Config{
		UpstreamURL: "https://learn.test/mcp",
		// httptest's certificate names example.com; the tunnel target is learn.test.
		UpstreamTLS: &tls.Config{RootCAs: pool, ServerName: "example.com"},
		Proxy:       ProxyFromEnv(envOf(map[string]string{"HTTPS_PROXY": proxyURL})),
	})
	const trace = "5bf92f3577b34da6a3ce929d0e0e4737"
	cs := connect(t, ts.URL, "00-"+trace+"-00f067aa0ba902b7-01")
	got, isErr := callText(t, cs, learn.ToolDocsFetch, map[string]any{"url": "https://learn.test/dotnet/page"})
	if isErr || !strings.Contains(got, "https://learn.test/dotnet/page") {
		t.Fatalf("fetch = %q (isError %v)", got, isErr)
	}
	reqs := proxy.requests()
	if len(reqs) < 2 {
		t.Fatalf("the proxy saw %d CONNECTs, want one per upstream request (>= 2)", len(reqs))
	}
	checkProxied(t, reqs, http.MethodConnect, "learn.test:443", trace)
	if calls := fake.Calls(); len(calls) != 1 || traceIDFromHeader(calls[0].Traceparent) != trace {
		t.Errorf("upstream calls = %+v, want one with trace-id %s", calls, trace)
	}
	if _, err := ts.CheckUpstream(context.Background()); err != nil {
		t.Errorf("CheckUpstream: %v", err)
	}
}

func TestProxyFromEnv(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		target string
		want   string
	}{
		{"https proxy", map[string]string{"HTTPS_PROXY": "http://egress-gateway:3128"}, "https://learn.microsoft.com/api/mcp", "http://egress-gateway:3128"},
		{"lower-case", map[string]string{"https_proxy": "http://gw:3128"}, "https://learn.microsoft.com/api/mcp", "http://gw:3128"},
		{"http proxy for http", map[string]string{"HTTP_PROXY": "http://gw:3128", "HTTPS_PROXY": "http://other:1"}, "http://learn.test/mcp", "http://gw:3128"},
		{"no_proxy match", map[string]string{"HTTPS_PROXY": "http://gw:3128", "NO_PROXY": "mcp-sidecar,learn.test"}, "https://learn.test/mcp", ""},
		{"no proxy set", map[string]string{}, "https://learn.microsoft.com/api/mcp", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.target, nil)
			u, err := ProxyFromEnv(envOf(tc.env))(req)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if u != nil {
				got = u.String()
			}
			if got != tc.want {
				t.Errorf("proxy = %q, want %q", got, tc.want)
			}
		})
	}
}
