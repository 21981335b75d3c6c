//go:build linux

package egress

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchModel is a loopback HTTPS "model" answering a small completion.
func benchModel(b *testing.B) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchMedian runs do b.N times (use -benchtime=1000x) and reports the
// median and p90 of one call, in microseconds.
func benchMedian(b *testing.B, do func() error) {
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := do(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(ds[len(ds)*9/10].Microseconds()), "p90-µs")
}

func post(c *http.Client, u string, auth string) error {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set("Authorization", auth)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return &url.Error{Op: "POST", URL: u, Err: io.ErrUnexpectedEOF}
	}
	return nil
}

// BenchmarkModelRequestTunnel is one model request as the agent sent it
// before issue 15: a new CONNECT tunnel and TLS session per request (the
// agent keeps no connection to the proxy), the key in its own header.
func BenchmarkModelRequestTunnel(b *testing.B) {
	srv := benchModel(b)
	h := startInjector(b, srv, true, "https")
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	proxy, _ := url.Parse("http://" + h.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool}}}
	u := "https://" + h.authority(srv) + "/v1/chat/completions"
	benchMedian(b, func() error { return post(c, u, "Bearer "+testSecret) })
}

// BenchmarkModelRequestInjected is the same request through the
// credential listener: plain HTTP to the gateway, which checks the
// placeholder, sets the key and opens the TLS session upstream.
func BenchmarkModelRequestInjected(b *testing.B) {
	srv := benchModel(b)
	h := startInjector(b, srv, true, "https")
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	u := "http://" + h.credAddr + "/" + h.authority(srv) + "/v1/chat/completions"
	benchMedian(b, func() error { return post(c, u, "Bearer "+testPlaceholder) })
}

// BenchmarkModelRequestPaired alternates the two paths above request by
// request, so both see the same load on a shared machine, and reports
// each median and the injected path's added latency (median of the
// paired differences).
func BenchmarkModelRequestPaired(b *testing.B) {
	srv := benchModel(b)
	h := startInjector(b, srv, true, "https")
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	proxy, _ := url.Parse("http://" + h.addr)
	tunnel := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool}}}
	direct := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	tu := "https://" + h.authority(srv) + "/v1/chat/completions"
	iu := "http://" + h.credAddr + "/" + h.authority(srv) + "/v1/chat/completions"
	var ts, is, diffs []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := post(tunnel, tu, "Bearer "+testSecret); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := post(direct, iu, "Bearer "+testPlaceholder); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		ts, is, diffs = append(ts, t1.Sub(t0)), append(is, t2.Sub(t1)), append(diffs, t2.Sub(t1)-t1.Sub(t0))
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds())
	}
	b.ReportMetric(med(ts), "tunnel-median-µs")
	b.ReportMetric(med(is), "injected-median-µs")
	b.ReportMetric(med(diffs), "added-median-µs")
}
