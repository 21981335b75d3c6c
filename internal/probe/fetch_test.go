//go:build linux

package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeGateway is an in-process proxy that answers every request with one
// status and never dials anything, so the tests stay on loopback.
func fakeGateway(t *testing.T, status int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func envFor(gateway string) *Env {
	c := DefaultContext()
	c.GatewayURL = gateway
	c.AllowedDomains = []string{".openai.com"}
	c.AllowedIPs = []string{"203.0.113.0/24"}
	return &Env{Ctx: c}
}

// TestGatewayProbesCanFail: the G40 gateway probes pass only on a 403;
// a gateway that tries the target (502) or forwards it (200) is a
// violation, and an unreachable gateway is unsupported, never a pass.
func TestGatewayProbesCanFail(t *testing.T) {
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String()
	closed.Close()
	tests := []struct {
		name   string
		status int
		want   Verdict
	}{
		{"refused by policy", http.StatusForbidden, Pass},
		{"tried to resolve or dial", http.StatusBadGateway, Violation},
		{"forwarded", http.StatusOK, Violation},
		{"unreachable gateway", 0, Unsupported},
	}
	probes := map[string]Probe{}
	for _, p := range designProbes() {
		probes[p.ID] = p
	}
	for _, tt := range tests {
		for _, id := range []string{"T06", "T07"} {
			t.Run(tt.name+"/"+id, func(t *testing.T) {
				url := closedURL
				if tt.status != 0 {
					srv, _ := fakeGateway(t, tt.status)
					url = srv.URL
				}
				e := envFor(url)
				p := probes[id]
				c := Capability{Tool: p.Tool(context.Background(), e), Shell: na(""), Alternates: Alternates{Outcome: NA}}
				Judge(p.goal(e.Ctx), &c)
				if c.Verdict != tt.want {
					t.Errorf("got %s (%s), want %s", c.Verdict, c.Tool.Summary, tt.want)
				}
			})
		}
	}
}

func TestFetch(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		url      string
		want     Outcome
		wantHits int32
	}{
		{"proxy refuses plain HTTP", http.StatusForbidden, "http://a.invalid/", Denied, 1},
		{"proxy forwards plain HTTP", http.StatusOK, "http://a.invalid/", Allowed, 1},
		{"proxy refuses CONNECT", http.StatusForbidden, "https://a.invalid/", Denied, 1},
		{"allowlisted name is never contacted", http.StatusOK, "https://api.openai.com/", NA, 0},
		{"allowlisted address is never contacted", http.StatusOK, "http://203.0.113.9/", NA, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, hits := fakeGateway(t, tt.status)
			r := envFor(srv.URL).fetch(context.Background(), request{URL: tt.url, Gateway: true})
			if r.Outcome != tt.want || hits.Load() != tt.wantHits {
				t.Errorf("got %s (%s) with %d gateway hits, want %s with %d", r.Outcome, r.Summary, hits.Load(), tt.want, tt.wantHits)
			}
		})
	}
}

// TestFetchNeverDialsOutDirect: without a proxy, a request to an address
// outside this machine is judged by the routing table, never dialed.
func TestFetchNeverDialsOutDirect(t *testing.T) {
	t.Setenv("HTTP_PROXY", "")
	t.Setenv("http_proxy", "")
	e := &Env{Ctx: DefaultContext()}
	r := e.fetch(context.Background(), request{URL: "http://192.0.2.1/"})
	if r.Outcome == Error || !strings.Contains(r.Summary, "route") {
		t.Errorf("got %s %q, want a routing-table judgement", r.Outcome, r.Summary)
	}
	r = e.fetch(context.Background(), request{URL: "http://real-name.example.com/"})
	if r.Outcome != NA {
		t.Errorf("a real name without a proxy: got %s %q, want N/A (not attempted)", r.Outcome, r.Summary)
	}
}

func TestSidecarHealth(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   Outcome
	}{{"healthy", http.StatusOK, Allowed}, {"unhealthy", http.StatusServiceUnavailable, Denied}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			e := &Env{Ctx: DefaultContext()}
			e.Ctx.SidecarURL = srv.URL + "/mcp"
			if r := sidecarHealth(context.Background(), e); r.Outcome != tt.want {
				t.Errorf("got %s (%s), want %s", r.Outcome, r.Summary, tt.want)
			}
		})
	}
}
