//go:build linux

package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"

	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// upstream is a loopback HTTP server that records the headers it saw.
func upstream(t *testing.T, tlsOn bool) (*httptest.Server, uint16, chan http.Header) {
	t.Helper()
	seen := make(chan http.Header, 16)
	hf := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		io.WriteString(w, "hello from upstream")
	})
	var srv *httptest.Server
	if tlsOn {
		srv = httptest.NewTLSServer(hf)
	} else {
		srv = httptest.NewServer(hf)
	}
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	p, _ := strconv.Atoi(u.Port())
	return srv, uint16(p), seen
}

func proxyClient(h *harness, tr *http.Transport) *http.Client {
	proxy, _ := url.Parse("http://" + h.addr)
	if tr == nil {
		tr = &http.Transport{}
	}
	tr.Proxy = http.ProxyURL(proxy)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

var ignoreVolatile = cmp.Options{cmpopts.IgnoreFields(Decision{}, "Time", "Client", "DurationMS", "BytesUp"), cmpopts.IgnoreUnexported(Decision{})}

func TestForwardAllowed(t *testing.T) {
	_, port, seen := upstream(t, false)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true)
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://API.allowed.test:%d/x", port), nil)
	req.Header.Set("Traceparent", testTraceparent)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Secret", "must-not-leak")
	resp, err := proxyClient(h, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello from upstream" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	hdr := <-seen
	for k := range hdr {
		if strings.HasPrefix(k, "Proxy-") {
			t.Errorf("upstream received %s", k)
		}
	}
	if hdr.Get("Traceparent") != testTraceparent {
		t.Errorf("upstream traceparent %q", hdr.Get("Traceparent"))
	}
	want := Decision{RunID: "run-test", Method: "GET", Host: "api.allowed.test", Port: port, ResolvedIP: "127.0.0.1",
		Decision: Allow, Rule: ".allowed.test 127.0.0.1/32", BytesDown: int64(len(body)), CorrelationID: testTraceID, Path: "/x"}
	if diff := cmp.Diff([]Decision{want}, h.waitDecisions(1), ignoreVolatile); diff != "" {
		t.Errorf("decision mismatch (-want +got):\n%s", diff)
	}
}

func TestConnectAllowed(t *testing.T) {
	srv, port, _ := upstream(t, true)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"},
		GetProxyConnectHeader: func(_ context.Context, _ *url.URL, _ string) (http.Header, error) {
			return http.Header{"Traceparent": {testTraceparent}}, nil
		},
		DisableKeepAlives: true,
	}
	resp, err := proxyClient(h, tr).Get(fmt.Sprintf("https://api.allowed.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello from upstream" {
		t.Fatalf("body %q", body)
	}
	tr.CloseIdleConnections()
	ds := h.waitDecisions(1)
	d := ds[0]
	if d.Decision != Allow || d.Method != "CONNECT" || d.ResolvedIP != "127.0.0.1" || d.CorrelationID != testTraceID || d.Error != "" {
		t.Errorf("decision %+v", d)
	}
	if d.BytesUp < 100 || d.BytesDown < 100 {
		t.Errorf("bytes up %d down %d: a TLS handshake moves more", d.BytesUp, d.BytesDown)
	}
}
