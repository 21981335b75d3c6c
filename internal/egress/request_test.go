//go:build linux

package egress

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// seenRequest is what an upstream received.
type seenRequest struct {
	host   string
	header http.Header
}

// hostUpstream is a loopback HTTP server that records the Host and
// headers each request arrived with.
func hostUpstream(t *testing.T) (uint16, chan seenRequest) {
	t.Helper()
	seen := make(chan seenRequest, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- seenRequest{r.Host, r.Header.Clone()}
		io.WriteString(w, "hello from upstream")
	}))
	t.Cleanup(srv.Close)
	return uint16(srv.Listener.Addr().(*net.TCPAddr).Port), seen
}

func noneSeen(t *testing.T, seen chan seenRequest) {
	t.Helper()
	select {
	case r := <-seen:
		t.Errorf("the upstream received a request for %q", r.host)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestKeptAliveConnectionChecksEveryRequest: after a first request on a
// kept-alive connection (the readiness probe, or an allowed forward), a
// second one whose Host header names another host is refused with its own
// decision line and never forwarded, whether sent after the first answer
// or pipelined behind the first request. (Before issue 19 the gateway
// served one request per connection; now every request's own header
// block is checked.)
func TestKeptAliveConnectionChecksEveryRequest(t *testing.T) {
	port, seen := hostUpstream(t)
	evil := fmt.Sprintf("GET http://pub.allowed.test:%d/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", port)
	firsts := map[string]string{
		"healthz": "GET /healthz HTTP/1.1\r\nHost: pub.allowed.test\r\n\r\n",
		"forward": fmt.Sprintf("GET http://pub.allowed.test:%d/ HTTP/1.1\r\nHost: pub.allowed.test:%d\r\n\r\n", port, port),
	}
	for name, first := range firsts {
		for _, pipelined := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pipelined=%v", name, pipelined), func(t *testing.T) {
				h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"pub.allowed.test": "127.0.0.1"}), true)
				req := first
				if pipelined {
					req += evil
				}
				resp, _, c, br := h.raw(req)
				if resp.StatusCode != 200 || resp.Close {
					t.Fatalf("first answer %d, close %v: want 200, kept alive", resp.StatusCode, resp.Close)
				}
				if name == "forward" {
					<-seen
				}
				if !pipelined {
					io.WriteString(c, evil)
				}
				resp2, err := http.ReadResponse(br, &http.Request{Method: "GET"})
				if err != nil {
					t.Fatalf("second answer: %v", err)
				}
				body, _ := io.ReadAll(resp2.Body)
				if resp2.StatusCode != 403 || !strings.Contains(string(body), "Host header") || !resp2.Close {
					t.Errorf("second answer %d %q close %v: want 403 for the Host header, closing", resp2.StatusCode, body, resp2.Close)
				}
				n := map[string]int{"healthz": 1, "forward": 2}[name]
				ds := h.waitDecisions(n)
				if d := ds[n-1]; d.Decision != Deny || !strings.Contains(d.Reason, "evil.test") {
					t.Errorf("second request's decision %+v", d)
				}
				if rest, _ := io.ReadAll(br); len(rest) != 0 {
					t.Errorf("the gateway kept talking after the refusal: %q", rest)
				}
				noneSeen(t, seen)
			})
		}
	}
}

// TestEveryRequestChecked: a keep-alive client sends three requests; each
// gets its own decision line, and the one for another host is refused.
func TestEveryRequestChecked(t *testing.T) {
	port, seen := hostUpstream(t)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"pub.allowed.test": "127.0.0.1"}), true)
	client := proxyClient(h, nil)
	url := fmt.Sprintf("http://pub.allowed.test:%d/", port)
	for i, host := range []string{"", "evil.test", ""} {
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 403}[host == ""]; resp.StatusCode != want {
			t.Errorf("request %d (Host %q): status %d, want %d", i, host, resp.StatusCode, want)
		}
	}
	ds := h.waitDecisions(3)
	for i, want := range []string{Allow, Deny, Allow} {
		if ds[i].Decision != want {
			t.Errorf("decision %d: %+v, want %s", i, ds[i], want)
		}
	}
	if !strings.Contains(ds[1].Reason, "evil.test") {
		t.Errorf("reason %q", ds[1].Reason)
	}
	for range 2 {
		if r := <-seen; r.host != fmt.Sprintf("pub.allowed.test:%d", port) {
			t.Errorf("upstream saw Host %q", r.host)
		}
	}
	noneSeen(t, seen)
}

// TestRequestWithoutItsHeaderBlockRefused covers the guard behind the
// recorder: a request whose own header block is not known (a connection
// the recorder does not wrap, or a block that is not the request's) is
// refused with a decision line.
func TestRequestWithoutItsHeaderBlockRefused(t *testing.T) {
	h := startGateway(t, testConfig(false), newResolver(nil), false)
	rc := &recordingConn{limit: 1 << 16}
	rc.record([]byte("GET http://pub.allowed.test/other HTTP/1.1\r\nHost: pub.allowed.test\r\n\r\n"))
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "http://pub.allowed.test/", nil), // unwrapped
		httptest.NewRequest("GET", "http://pub.allowed.test/", nil), // another request line
		httptest.NewRequest("GET", "http://pub.allowed.test/", nil), // poisoned by the one before
	} {
		if len(h.decisions()) > 0 {
			r = r.WithContext(rawHeaderContext(r.Context(), rc))
		}
		w := httptest.NewRecorder()
		h.g.ServeHTTP(w, r)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "denied:") || w.Header().Get("Connection") != "close" {
			t.Errorf("got %d %q %v", w.Code, w.Body, w.Header())
		}
		n := len(h.decisions())
		if d := h.waitDecisions(n)[n-1]; d.Decision != Deny {
			t.Errorf("decision %+v", d)
		}
	}
}

// lookalikes are spellings of pub.allowed.test (or of an IDN under
// .allowed.test) that IDNA maps to one ASCII name.
var lookalikes = []struct{ name, in, want string }{
	{"full-width letters", "ｐｕｂ.allowed.test", "pub.allowed.test"},
	{"ideographic full stop", "pub。allowed。test", "pub.allowed.test"},
	{"full-width full stop", "pub．allowed．test", "pub.allowed.test"},
	{"half-width ideographic full stop", "pub｡allowed｡test", "pub.allowed.test"},
	{"mixed case", "PuB.AlLoWeD.TeSt", "pub.allowed.test"},
	{"trailing dot", "pub.allowed.test.", "pub.allowed.test"},
	{"trailing ideographic dot", "pub.allowed.test。", "pub.allowed.test"},
	{"unicode", "bücher.allowed.test", "xn--bcher-kva.allowed.test"},
	{"punycode", "xn--bcher-kva.allowed.test", "xn--bcher-kva.allowed.test"},
	{"upper-case unicode", "BÜCHER.allowed.test", "xn--bcher-kva.allowed.test"},
}

func lookalikeResolver() *fakeResolver {
	return newResolver(map[string]string{"pub.allowed.test": "127.0.0.1", "xn--bcher-kva.allowed.test": "127.0.0.1"})
}

// TestLookalikeNamesForward: the name the policy checked is the name
// looked up, sent as Host, and logged.
func TestLookalikeNamesForward(t *testing.T) {
	port, seen := hostUpstream(t)
	for _, tc := range lookalikes {
		t.Run(tc.name, func(t *testing.T) {
			res := lookalikeResolver()
			h := startGateway(t, testConfig(true, port), res, true)
			resp, body, _, _ := h.raw(fmt.Sprintf("GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n", tc.in, port, tc.want, port))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d %q", resp.StatusCode, body)
			}
			if r := <-seen; r.host != fmt.Sprintf("%s:%d", tc.want, port) {
				t.Errorf("upstream saw Host %q, want %s:%d", r.host, tc.want, port)
			}
			checkNormalised(t, h, res, tc.want)
		})
	}
}

// TestLookalikeNamesConnect: the same for CONNECT (no Host header: it
// must be ASCII, and CONNECT may omit it).
func TestLookalikeNamesConnect(t *testing.T) {
	echo := echoServer(t)
	for _, tc := range lookalikes {
		t.Run(tc.name, func(t *testing.T) {
			res := lookalikeResolver()
			h := startGateway(t, testConfig(true, echo), res, true)
			resp, _, c, _ := h.raw(fmt.Sprintf("CONNECT %s:%d HTTP/1.1\r\n\r\n", tc.in, echo))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			c.Close()
			checkNormalised(t, h, res, tc.want)
		})
	}
}

func checkNormalised(t *testing.T, h *harness, res *fakeResolver, want string) {
	t.Helper()
	if got := res.looked(); len(got) != 1 || got[0] != want {
		t.Errorf("looked up %q, want [%s]", got, want)
	}
	if d := h.waitDecisions(1)[0]; d.Decision != Allow || d.Host != want || d.Rule != ".allowed.test 127.0.0.1/32" {
		t.Errorf("decision %+v, want allow of %s", d, want)
	}
}

// TestLookalikeNamesTLSServerName: for an https absolute URI the gateway
// originates TLS, and its server name is the checked name.
func TestLookalikeNamesTLSServerName(t *testing.T) {
	names := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		names <- hello.ServerName
		return nil, nil
	}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the gateway refuses its certificate
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := uint16(srv.Listener.Addr().(*net.TCPAddr).Port)
	for _, tc := range lookalikes {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, testConfig(true, port), lookalikeResolver(), true)
			h.raw(fmt.Sprintf("GET https://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n", tc.in, port, tc.want, port))
			if got := <-names; got != tc.want {
				t.Errorf("TLS server name %q, want %q", got, tc.want)
			}
		})
	}
}

// TestUpgradeRefused: a plain-HTTP protocol upgrade would become a raw
// tunnel on an HTTP port; it is refused with a reason.
func TestUpgradeRefused(t *testing.T) {
	port, seen := hostUpstream(t)
	cases := map[string]string{
		"websocket":      "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n",
		"h2c":            "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n",
		"bare upgrade":   "Upgrade: anything/1\r\n",
		"connection tok": "Connection: keep-alive, upgrade\r\n",
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"ws.allowed.test": "127.0.0.1"}), true)
			resp, body, _, _ := h.raw(fmt.Sprintf("GET http://ws.allowed.test:%d/ HTTP/1.1\r\nHost: ws.allowed.test:%d\r\n%s\r\n", port, port, extra))
			checkDenied(t, h, resp, body, 403, "protocol upgrade")
			noneSeen(t, seen)
		})
	}
}

// TestConnectionListedHeadersStripped: headers the client marks hop-by-hop
// in Connection do not reach the upstream.
func TestConnectionListedHeadersStripped(t *testing.T) {
	port, seen := hostUpstream(t)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"pub.allowed.test": "127.0.0.1"}), true)
	resp, body, _, _ := h.raw(fmt.Sprintf("GET http://pub.allowed.test:%d/ HTTP/1.1\r\nHost: pub.allowed.test:%d\r\nConnection: X-Hop\r\nX-Hop: secret\r\nX-Kept: yes\r\n\r\n", port, port))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %q", resp.StatusCode, body)
	}
	r := <-seen
	if r.header.Get("X-Hop") != "" || r.header.Get("X-Kept") != "yes" {
		t.Errorf("upstream headers %v", r.header)
	}
}
