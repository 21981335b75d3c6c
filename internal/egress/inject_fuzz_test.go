//go:build linux

package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// FuzzCredentialListener: whatever the path and the header, the listener
// dials only when the header is exactly the run's placeholder, formatted,
// and the path names the credential's own host; it never echoes the
// credential's value to the client or into the decision log.
func FuzzCredentialListener(f *testing.F) {
	for _, s := range []string{"/api.allowed.test/v1/x", "/API.allowed.test./v1", "/api.allowed.test:443/v1", "/api.allowed.test:80/v1",
		"/other.allowed.test/v1", "/api.allowed.test%2F@evil.test/v1", "//api.allowed.test/v1", "/user@api.allowed.test/x", "/127.0.0.1/v1", "/"} {
		f.Add(s, "Bearer "+testPlaceholder)
		f.Add(s, testPlaceholder)
		f.Add(s, "Bearer "+testPlaceholder+" ")
	}
	p, err := netpolicy.Compile(testConfig(true))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, auth string) {
		if !strings.HasPrefix(path, "/") {
			return
		}
		req, err := http.NewRequest(http.MethodPost, "http://gw"+path, strings.NewReader("{}"))
		if err != nil || req.URL.Host != "gw" {
			return
		}
		req.RequestURI = path
		req.URL.Scheme, req.URL.Host = "", ""
		req.Header.Set("Authorization", auth)
		log := &syncBuffer{}
		in := &Injection{Placeholder: testPlaceholder, Credentials: []Credential{{Host: "api.allowed.test", Scheme: "https",
			Header: "Authorization", Format: "Bearer {value}", Value: testSecret, Source: "K"}}}
		g, err := New(Options{Policy: p, Log: NewDecisionLog(log), Resolver: newResolver(map[string]string{"api.allowed.test": "93.184.215.14"}), Injection: in})
		if err != nil {
			t.Fatal(err)
		}
		dialed := false
		g.dial = func(_ context.Context, _, _ string) (net.Conn, error) {
			dialed = true
			return nil, errors.New("fuzz: no dialing")
		}
		rec := httptest.NewRecorder()
		g.injectSrv.Handler.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Result().Body)
		if dialed {
			seg, _, _ := strings.Cut(strings.TrimPrefix(req.URL.EscapedPath(), "/"), "/")
			host, _, _ := strings.Cut(seg, ":")
			if h, err := netpolicy.NormalizeHost(host); err != nil || h != "api.allowed.test" || auth != "Bearer "+testPlaceholder {
				t.Fatalf("dialed for path %q with Authorization %q", path, auth)
			}
		}
		if strings.Contains(string(body), testSecret) || strings.Contains(log.String(), testSecret) {
			t.Fatal("the credential's value was echoed")
		}
	})
}
