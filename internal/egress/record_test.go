//go:build linux

package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// The record's invariant (issue 26): every request the gateway accepted
// has exactly one decision line, written before the gateway is done,
// whatever happens to the request on the way: the client goes away in the
// middle of the answer, the upstream sends less than its Content-Length
// or resets, the answer streams, the gateway shuts down. These tests
// compare what the upstream fakes received with the decision lines, by
// correlation id.

// Upstream behaviours.
const (
	answerWhole  = "whole"  // a JSON answer with its Content-Length
	answerStream = "stream" // server-sent events, flushed one by one
	answerShort  = "short"  // a Content-Length larger than the body sent
	answerReset  = "reset"  // headers and part of the body, then a reset
	answerHold   = "hold"   // headers and part of the body, then waits
)

// recordUpstream serves one behaviour over plain HTTP and over TLS (with
// HTTP/2, as a model API does), and records the trace id of every request
// and every TLS connection it accepted.
type recordUpstream struct {
	plain, tls *httptest.Server
	behaviour  string
	release    chan struct{} // closed to end every held answer

	mu     sync.Mutex
	traces []string // one per request received, in order
	conns  int      // TLS connections accepted (CONNECT tunnels)
}

func startRecordUpstream(t testing.TB, behaviour string) *recordUpstream {
	t.Helper()
	u := &recordUpstream{behaviour: behaviour, release: make(chan struct{})}
	h := http.HandlerFunc(u.serve)
	u.plain = httptest.NewServer(h)
	u.tls = httptest.NewUnstartedServer(h)
	u.tls.EnableHTTP2 = true
	u.tls.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.mu.Lock()
			u.conns++
			u.mu.Unlock()
		}
	}
	u.tls.StartTLS()
	t.Cleanup(func() {
		u.releaseAll()
		u.plain.CloseClientConnections()
		u.tls.CloseClientConnections()
		u.plain.Close()
		u.tls.Close()
	})
	return u
}

func (u *recordUpstream) releaseAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

// headerAnswer, on a request, overrides the upstream's behaviour.
const headerAnswer = "X-Answer"

func (u *recordUpstream) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	u.traces = append(u.traces, traceID(r.Header.Values("Traceparent")))
	u.mu.Unlock()
	body := `{"id":"chatcmpl-1","choices":[{"message":{"role":"assistant","content":"` + strings.Repeat("x", 4096) + `"}}]}`
	behaviour := u.behaviour
	if b := r.Header.Get(headerAnswer); b != "" {
		behaviour = b
	}
	switch behaviour {
	case answerWhole:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	case answerStream:
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 5 {
			fmt.Fprintf(w, "data: {\"delta\":%d}\n\n", i)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	case answerShort:
		w.Header().Set("Content-Length", strconv.Itoa(len(body)+1000))
		io.WriteString(w, body) // net/http then closes the connection: the body ends early
	case answerReset, answerHold:
		w.Header().Set("Content-Length", strconv.Itoa(len(body)*2))
		io.WriteString(w, body)
		w.(http.Flusher).Flush()
		if behaviour == answerHold {
			select {
			case <-u.release:
			case <-r.Context().Done():
			}
		}
		if r.ProtoMajor == 1 {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0) // an RST, not a FIN
				}
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // HTTP/2: the stream is reset
	}
}

func (u *recordUpstream) received() (traces []string, conns int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.traces...), u.conns
}

// Paths through the gateway.
const (
	pathProxy      = "proxy plain HTTP"
	pathCredential = "credential listener"
	pathConnect    = "proxy CONNECT"
)

// recordRig is a gateway with both listeners in front of one upstream.
type recordRig struct {
	*harness
	credAddr string
	up       *recordUpstream
	roots    *x509.CertPool
}

func startRecordRig(t testing.TB, up *recordUpstream) *recordRig {
	t.Helper()
	plainPort, tlsPort := serverPort(up.plain), serverPort(up.tls)
	cfg := netpolicy.NewConfig([]string{"example.com"}, []string{"127.0.0.1/32"})
	cfg.HTTPPorts = append(cfg.HTTPPorts, plainPort, tlsPort)
	cfg.ConnectPorts = append(cfg.ConnectPorts, tlsPort)
	roots := x509.NewCertPool()
	roots.AddCert(up.tls.Certificate())
	in := &Injection{Placeholder: testPlaceholder, RootCAs: roots, Credentials: []Credential{{
		Host: "example.com", Port: tlsPort, Scheme: "https", Header: "Authorization", Format: "Bearer {value}",
		Value: testSecret, Source: "OPENAI_API_KEY",
	}}}
	h := startGateway(t, cfg, newResolver(map[string]string{"example.com": "127.0.0.1"}), true, func(o *Options) { o.Injection = in })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.g.ServeCredentials(ln)
	return &recordRig{harness: h, credAddr: ln.Addr().String(), up: up, roots: roots}
}

func serverPort(s *httptest.Server) uint16 {
	u, _ := url.Parse(s.URL)
	p, _ := strconv.Atoi(u.Port())
	return uint16(p)
}

// client is the workload's HTTP client for path: keep-alive on or off,
// and every request's traceparent on the CONNECT too.
func (rr *recordRig) client(path string, keepAlive bool) *http.Client {
	tr := &http.Transport{DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 16}
	switch path {
	case pathProxy, pathConnect:
		proxy, _ := url.Parse("http://" + rr.addr)
		tr.Proxy = http.ProxyURL(proxy)
		tr.TLSClientConfig = &tls.Config{RootCAs: rr.roots, ServerName: "example.com"}
		tr.GetProxyConnectHeader = func(ctx context.Context, _ *url.URL, _ string) (http.Header, error) {
			if tp, _ := ctx.Value(traceKey{}).(string); tp != "" {
				return http.Header{"Traceparent": {tp}}, nil
			}
			return nil, nil
		}
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

type traceKey struct{}

// request is the i-th request of path, its traceparent set.
func (rr *recordRig) request(ctx context.Context, path string, i int) *http.Request {
	tp, _ := traceparent(i)
	var target string
	switch path {
	case pathProxy:
		target = fmt.Sprintf("http://example.com:%d/v1/chat/completions", serverPort(rr.up.plain))
	case pathConnect:
		target = fmt.Sprintf("https://example.com:%d/v1/chat/completions", serverPort(rr.up.tls))
	case pathCredential:
		target = fmt.Sprintf("http://%s/example.com:%d/v1/chat/completions", rr.credAddr, serverPort(rr.up.tls))
	}
	req, _ := http.NewRequestWithContext(context.WithValue(ctx, traceKey{}, tp), http.MethodPost, target, strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set("Traceparent", tp)
	req.Header.Set("Content-Type", "application/json")
	if path == pathCredential {
		req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	}
	return req
}

// Ways the client reads an answer.
const (
	readAll    = "reads it all"
	readCutOff = "closes mid-answer"
)

// send makes the i-th request and reads its answer as reading says.
func (rr *recordRig) send(c *http.Client, path string, i int, reading string) {
	rr.sendAnswer(c, path, i, reading, "")
}

// sendAnswer is send asking the upstream for the answer behaviour (""
// for its own).
func (rr *recordRig) sendAnswer(c *http.Client, path string, i int, reading, behaviour string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := rr.request(ctx, path, i)
	if behaviour != "" {
		req.Header.Set(headerAnswer, behaviour)
	}
	resp, err := c.Do(req)
	if err != nil {
		return // the outcome is the gateway's to record, not the client's
	}
	if reading == readCutOff {
		io.ReadFull(resp.Body, make([]byte, 64))
		cancel() // the connection is closed with the answer unread
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
}

// recordGap compares the upstream's requests (tunnels, for CONNECT) with
// the decision lines of allowed requests: missing and duplicated lines.
func (rr *recordRig) recordGap(path string) (missing, duplicated int, detail string) {
	traces, conns := rr.up.received()
	lines := map[string]int{}
	allowed := 0
	for _, d := range rr.decisions() {
		if d.Decision == Allow {
			lines[d.CorrelationID]++
			allowed++
		}
	}
	if path == pathConnect {
		// One line per tunnel: each tunnel is one TLS connection.
		if allowed < conns {
			missing = conns - allowed
		}
		return missing, 0, fmt.Sprintf("%d tunnels reached the upstream, %d allowed CONNECT lines", conns, allowed)
	}
	got := map[string]int{}
	for _, id := range traces {
		got[id]++
	}
	for id, n := range got {
		switch l := lines[id]; {
		case l < n:
			missing += n - l
		case l > n:
			duplicated += l - n
		}
	}
	return missing, duplicated, fmt.Sprintf("%d requests reached the upstream, %d allowed lines", len(traces), allowed)
}

// TestEveryForwardedRequestHasItsLine: for each path, each upstream
// behaviour and each way of reading, every request that reached the
// upstream has exactly one allowed line once the gateway has shut down.
func TestEveryForwardedRequestHasItsLine(t *testing.T) {
	for _, path := range []string{pathProxy, pathCredential, pathConnect} {
		for _, behaviour := range []string{answerWhole, answerStream, answerShort, answerReset} {
			for _, reading := range []string{readAll, readCutOff} {
				for _, keepAlive := range []bool{true, false} {
					name := fmt.Sprintf("%s/%s/%s/keepalive=%v", path, behaviour, reading, keepAlive)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						up := startRecordUpstream(t, behaviour)
						rr := startRecordRig(t, up)
						c := rr.client(path, keepAlive)
						for i := range 3 {
							rr.send(c, path, i, reading)
						}
						c.CloseIdleConnections()
						rr.shutdown(t)
						if missing, dup, detail := rr.recordGap(path); missing+dup > 0 {
							t.Errorf("%d lines missing, %d duplicated: %s\n%s", missing, dup, detail, rr.log.String())
						}
						rr.checkCounts(t)
					})
				}
			}
		}
	}
}

// shutdown stops the gateway as the role does at SIGTERM.
func (rr *recordRig) shutdown(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownWait)
	defer cancel()
	rr.g.Shutdown(ctx)
}

// checkCounts: the gateway's own account of what it accepted and wrote
// agrees with its log.
func (rr *recordRig) checkCounts(t testing.TB) {
	t.Helper()
	c := rr.g.Counts()
	if n := int64(len(rr.decisions())); c.Accepted != c.Recorded || c.Recorded != n {
		t.Errorf("counts %+v, %d lines in the log: want accepted = recorded = lines", c, n)
	}
}

// TestHeldAnswersAtShutdown: requests whose answers are still streaming
// when the gateway shuts down (the workload exits with them open) each
// get their line, marked interrupted.
func TestHeldAnswersAtShutdown(t *testing.T) {
	for _, path := range []string{pathProxy, pathCredential, pathConnect} {
		t.Run(path, func(t *testing.T) {
			up := startRecordUpstream(t, answerHold)
			rr := startRecordRig(t, up)
			c := rr.client(path, true)
			var wg sync.WaitGroup
			const n = 10
			for i := range n {
				wg.Add(1)
				go func() { defer wg.Done(); rr.send(c, path, i, readAll) }()
			}
			waitFor(t, func() bool { tr, conns := up.received(); return len(tr) == n && (path != pathConnect || conns == n) })
			rr.shutdown(t)
			wg.Wait()
			if missing, dup, detail := rr.recordGap(path); missing+dup > 0 {
				t.Errorf("%d lines missing, %d duplicated: %s\n%s", missing, dup, detail, rr.log.String())
			}
			for _, d := range rr.decisions() {
				if d.Decision == Allow && !strings.HasPrefix(d.Error, ErrorInterrupted) {
					t.Errorf("line %+v: want its error to say interrupted", d)
				}
			}
			rr.checkCounts(t)
		})
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNoSilentRetry: the upstream reads a request on a kept connection
// and closes it without an answer. Go's transport would send the request
// again on a new connection, unseen by the handler: one line, two
// deliveries (red team, issue 26). The gateway sends it once, answers
// 502, and the line says why.
func TestNoSilentRetry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	seen := map[string]int{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					mu.Lock()
					seen[req.URL.Path]++
					mu.Unlock()
					if n > 0 { // the second request on a connection: read, no answer
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"up.allowed.test": "127.0.0.1"}), true)
	client := proxyClient(h, nil)
	for i, path := range []string{"/first", "/second"} {
		resp, err := client.Get(fmt.Sprintf("http://up.allowed.test:%d%s", port, path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := []int{200, 502}[i]; resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	mu.Lock()
	n := seen["/second"]
	mu.Unlock()
	if n != 1 {
		t.Errorf("the upstream received /second %d times, want once", n)
	}
	if d := h.waitDecisions(2)[1]; d.Decision != Allow || !strings.Contains(d.Error, "not sent again") {
		t.Errorf("decision %+v, want allow with the refused retry in its error", d)
	}
}
