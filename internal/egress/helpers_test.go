//go:build linux

package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// fakeResolver answers from a table and records every lookup, so a test
// can show that a denied name was never looked up.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr // successive answers; the last repeats
	lookups []string
}

func newResolver(m map[string]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}}
	for host, list := range m {
		r.add(host, strings.Fields(list)...)
	}
	return r
}

func (r *fakeResolver) add(host string, addrs ...string) {
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	r.mu.Lock()
	r.answers[host] = append(r.answers[host], as)
	r.mu.Unlock()
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	list := r.answers[host]
	if len(list) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := 0
	for _, h := range r.lookups {
		if h == host {
			n++
		}
	}
	return list[min(n, len(list))-1], nil
}

func (r *fakeResolver) looked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lookups...)
}

// syncBuffer is a decision-log sink tests can read while the gateway writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness is a live gateway on 127.0.0.1:0.
type harness struct {
	t     testing.TB
	g     *Gateway
	addr  string
	res   *fakeResolver
	log   *syncBuffer
	mu    sync.Mutex
	dials []string
}

type harnessOpt func(*Options)

func withLimits(l Limits) harnessOpt { return func(o *Options) { o.Limits = l } }

// startGateway serves cfg. With realDial false, any dial fails the test's
// expectations by being recorded and refused: no packet leaves.
func startGateway(t testing.TB, cfg netpolicy.Config, res *fakeResolver, realDial bool, opts ...harnessOpt) *harness {
	t.Helper()
	p, err := netpolicy.Compile(cfg)
	if err != nil {
		t.Fatalf("compiling policy: %v", err)
	}
	h := &harness{t: t, res: res, log: &syncBuffer{}}
	o := Options{Policy: p, Log: NewDecisionLog(h.log), Resolver: res, RunID: "run-test"}
	for _, f := range opts {
		f(&o)
	}
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	real := g.dial
	g.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.mu.Lock()
		h.dials = append(h.dials, addr)
		h.mu.Unlock()
		if realDial {
			return real(ctx, network, addr)
		}
		return nil, errors.New("test harness: dialing disabled")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.g, h.addr = g, ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- g.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return h
}

func (h *harness) dialed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dials...)
}

// decisions parses the log so far.
func (h *harness) decisions() []Decision {
	h.t.Helper()
	var out []Decision
	for _, line := range strings.Split(strings.TrimSpace(h.log.String()), "\n") {
		if line == "" {
			continue
		}
		var d Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			h.t.Fatalf("decision line %q: %v", line, err)
		}
		out = append(out, d)
	}
	return out
}

// waitDecisions waits until n lines are logged (tunnels log when they end).
func (h *harness) waitDecisions(n int) []Decision {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ds := h.decisions()
		if len(ds) >= n || time.Now().After(deadline) {
			if len(ds) != n {
				h.t.Fatalf("got %d decisions, want %d: %+v", len(ds), n, ds)
			}
			return ds
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// raw sends a raw request and returns the response (body read) and the
// connection, still open.
func (h *harness) raw(req string) (*http.Response, string, net.Conn, *bufio.Reader) {
	h.t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return h.rawOn(c, req)
}

// rawOn sends req on c and reads the response.
func (h *harness) rawOn(c net.Conn, req string) (*http.Response, string, net.Conn, *bufio.Reader) {
	h.t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		h.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		h.t.Fatalf("reading response to %q: %v", req, err)
	}
	var body string
	if resp.StatusCode != http.StatusOK || method != http.MethodConnect {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return resp, body, c, br
}

// connect opens a CONNECT tunnel to target and returns the response.
func (h *harness) connect(target string, extra ...string) (*http.Response, string, net.Conn, *bufio.Reader) {
	h.t.Helper()
	req := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, strings.Join(extra, ""))
	return h.raw(req)
}

// testConfig allows .allowed.test and exact.example, loopback by IP rule
// only when loopback is true, and the given extra port for both kinds.
func testConfig(loopback bool, ports ...uint16) netpolicy.Config {
	c := netpolicy.NewConfig([]string{".allowed.test", "exact.example"}, nil)
	if loopback {
		c.AllowedIPs = []string{"127.0.0.1/32"}
	}
	c.HTTPPorts = append(c.HTTPPorts, ports...)
	c.ConnectPorts = append(c.ConnectPorts, ports...)
	return c
}

const testTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
const testTraceID = "0af7651916cd43dd8448eb211c80319c"
