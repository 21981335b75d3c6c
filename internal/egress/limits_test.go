//go:build linux

package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondAnswerCannotRedirect: the resolver answers an allowed address
// first and the metadata address afterwards; the gateway looks up once and
// dials the first answer.
func TestSecondAnswerCannotRedirect(t *testing.T) {
	_, port, seen := upstream(t, false)
	res := newResolver(nil)
	res.add("api.allowed.test", "127.0.0.1")
	res.add("api.allowed.test", "169.254.169.254")
	h := startGateway(t, testConfig(true, port), res, true)
	resp, body, _, _ := h.raw(fmt.Sprintf("GET http://api.allowed.test:%d/ HTTP/1.1\r\nHost: api.allowed.test:%d\r\n\r\n", port, port))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %q", resp.StatusCode, body)
	}
	<-seen
	if got := res.looked(); len(got) != 1 {
		t.Errorf("lookups %v, want exactly one", got)
	}
	want := fmt.Sprintf("127.0.0.1:%d", port)
	if got := h.dialed(); len(got) != 1 || got[0] != want {
		t.Errorf("dialed %v, want [%s]", got, want)
	}
	if d := h.waitDecisions(1)[0]; d.ResolvedIP != "127.0.0.1" {
		t.Errorf("resolved_ip %q", d.ResolvedIP)
	}
}

// TestControlRefusesUncheckedAddress: even if a code path handed the
// dialer an address the policy refuses, the socket-level check stops it.
func TestControlRefusesUncheckedAddress(t *testing.T) {
	h := startGateway(t, testConfig(false), newResolver(nil), false)
	for _, addr := range []string{"127.0.0.1:443", "169.254.169.254:80", "[::1]:443", "10.0.0.1:443", "192.0.2.1:443", "api.allowed.test:443"} {
		if err := h.g.control(context.Background(), "tcp", addr, nil); err == nil {
			t.Errorf("control(%s) = nil, want a refusal", addr)
		}
	}
	hl := startGateway(t, testConfig(true), newResolver(nil), false)
	if err := hl.g.control(context.Background(), "tcp", "127.0.0.1:443", nil); err != nil {
		t.Errorf("control(covered address) = %v", err)
	}
	if err := hl.g.control(context.Background(), "tcp", "127.0.0.1:22", nil); err == nil {
		t.Error("control(port 22) = nil")
	}
}

func TestOversizedHeaders(t *testing.T) {
	res := newResolver(map[string]string{"api.allowed.test": "127.0.0.1"})
	h := startGateway(t, testConfig(true), res, false, withLimits(Limits{MaxHeaderBytes: 4096}))
	big := strings.Repeat("a", 64<<10)
	for _, req := range []string{
		"CONNECT api.allowed.test:443 HTTP/1.1\r\nX-Big: " + big + "\r\n\r\n",
		"GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\nX-Big: " + big + "\r\n\r\n",
		"GET http://api.allowed.test/" + big + " HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n",
	} {
		resp, _, _, _ := h.raw(req)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", resp.StatusCode)
		}
	}
	if got := res.looked(); len(got) != 0 {
		t.Errorf("looked up %v", got)
	}
}

// TestSlowloris: a client that trickles its headers is cut off after
// ReadHeaderTimeout, and other clients are served meanwhile.
func TestSlowloris(t *testing.T) {
	res := newResolver(nil)
	h := startGateway(t, testConfig(false), res, false, withLimits(Limits{ReadHeaderTimeout: 300 * time.Millisecond}))
	slow := make([]net.Conn, 20)
	for i := range slow {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "CONNECT api.allowed.test:443 HTTP/1.1\r\nX-A: ")
		slow[i] = c
	}
	start := time.Now()
	resp, _, _, _ := h.raw("GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Errorf("healthz during slowloris: %d", resp.StatusCode)
	}
	for _, c := range slow {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		go func() {
			for range 10 {
				io.WriteString(c, "a")
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	for i, c := range slow {
		_, err := io.ReadAll(c)
		// A reset is the gateway's close too: the trickling writer may
		// still be sending when the gateway hangs up, and the kernel
		// answers those bytes with RST. A deadline is not a close.
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("slow client %d: %v (want the gateway to close it)", i, err)
		}
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("slow clients held for %v", el)
	}
}

func TestOriginForm(t *testing.T) {
	h := startGateway(t, testConfig(false), newResolver(nil), false)
	resp, body, _, _ := h.raw("GET /healthz HTTP/1.1\r\nHost: egress-gateway:3128\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", resp.StatusCode, body)
	}
	if len(h.decisions()) != 0 {
		t.Errorf("healthz logged a decision")
	}
	resp, body, _, _ = h.raw("GET /other HTTP/1.1\r\nHost: egress-gateway:3128\r\n\r\n")
	checkDenied(t, h, resp, body, 400, "not a proxy request")
}

func TestCapacity(t *testing.T) {
	_, port, _ := upstream(t, false)
	res := newResolver(map[string]string{"api.allowed.test": "127.0.0.1"})
	h := startGateway(t, testConfig(true, port), res, true, withLimits(Limits{MaxConcurrent: 1}))
	target := fmt.Sprintf("api.allowed.test:%d", port)
	resp, _, c, _ := h.connect(target)
	if resp.StatusCode != 200 {
		t.Fatalf("first tunnel: %d", resp.StatusCode)
	}
	resp, body, _, _ := h.connect(target)
	if resp.StatusCode != 503 || !strings.Contains(body, "capacity") {
		t.Errorf("second tunnel: %d %q", resp.StatusCode, body)
	}
	c.Close()
	ds := h.waitDecisions(2)
	if ds[0].Decision != Deny || !strings.Contains(ds[0].Reason, "capacity") {
		t.Errorf("capacity decision %+v", ds[0])
	}
}

// TestTunnelRelaysAndCounts sends known bytes through a tunnel to an echo
// server and checks both counts, including bytes sent right behind the
// CONNECT request.
func TestTunnelRelaysAndCounts(t *testing.T) {
	echo := echoServer(t)
	h := startGateway(t, testConfig(true, echo), newResolver(map[string]string{"echo.allowed.test": "127.0.0.1"}), true)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := fmt.Sprintf("echo.allowed.test:%d", echo)
	head := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\nTraceparent: %s\r\n\r\n", target, target, testTraceparent)
	io.WriteString(c, head+"early")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connect: %v %v", resp, err)
	}
	payload := strings.Repeat("x", 1<<20)
	go io.WriteString(c, payload)
	got := make([]byte, len("early")+len(payload))
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, br)
	d := h.waitDecisions(1)[0]
	n := int64(len(got))
	if d.BytesUp != int64(len(head))+n || d.BytesDown != n || d.CorrelationID != testTraceID || d.Error != "" {
		t.Errorf("decision %+v, want %d bytes up (the CONNECT request and the tunnel) and %d down", d, int64(len(head))+n, n)
	}
}

func echoServer(t testing.TB) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func TestIdleTunnelClosed(t *testing.T) {
	echo := echoServer(t)
	h := startGateway(t, testConfig(true, echo), newResolver(map[string]string{"echo.allowed.test": "127.0.0.1"}), true,
		withLimits(Limits{IdleTimeout: 200 * time.Millisecond}))
	resp, _, c, br := h.connect(fmt.Sprintf("echo.allowed.test:%d", echo))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	start := time.Now()
	io.Copy(io.Discard, br)
	c.Close()
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("idle tunnel lived %v", el)
	}
	if d := h.waitDecisions(1)[0]; !strings.Contains(d.Error, "idle") {
		t.Errorf("decision error %q, want it to say idle", d.Error)
	}
}

func TestShutdownClosesTunnels(t *testing.T) {
	echo := echoServer(t)
	h := startGateway(t, testConfig(true, echo), newResolver(map[string]string{"echo.allowed.test": "127.0.0.1"}), true)
	var readers []*bufio.Reader
	for range 3 {
		resp, _, _, br := h.connect(fmt.Sprintf("echo.allowed.test:%d", echo))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		readers = append(readers, br)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(h.decisions()); n != 3 {
		t.Errorf("%d decisions logged by the end of Shutdown, want 3", n)
	}
	for _, br := range readers {
		if _, err := io.ReadAll(br); err != nil {
			t.Errorf("tunnel not closed cleanly: %v", err)
		}
	}
}

// TestTunnelMaxDuration: a busy tunnel is still closed at MaxDuration.
func TestTunnelMaxDuration(t *testing.T) {
	echo := echoServer(t)
	h := startGateway(t, testConfig(true, echo), newResolver(map[string]string{"echo.allowed.test": "127.0.0.1"}), true,
		withLimits(Limits{MaxDuration: 300 * time.Millisecond}))
	resp, _, c, br := h.connect(fmt.Sprintf("echo.allowed.test:%d", echo))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := io.WriteString(c, "ping"); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	io.Copy(io.Discard, br)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("busy tunnel lived %v past a 300ms limit", el)
	}
	if d := h.waitDecisions(1)[0]; !strings.Contains(d.Error, "time limit") || d.BytesUp == 0 {
		t.Errorf("decision %+v", d)
	}
}

// TestForwardCountsBody: bytes_up is everything the client sent, request
// line and headers included, so a request that carries its data in a
// header is not logged as nothing; path is logged with query values
// redacted.
func TestForwardCountsBody(t *testing.T) {
	_, port, _ := upstream(t, false)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true)
	big := strings.Repeat("a", 30000)
	for _, req := range []string{
		fmt.Sprintf("POST http://api.allowed.test:%d/v1/x?token=s3cret&q=hi HTTP/1.1\r\nHost: api.allowed.test:%d\r\nContent-Length: 11\r\n\r\nhello world", port, port),
		fmt.Sprintf("GET http://api.allowed.test:%d/v1/x?token=s3cret&q=hi HTTP/1.1\r\nHost: api.allowed.test:%d\r\nX-Data: %s\r\n\r\n", port, port, big),
	} {
		before := len(h.decisions())
		resp, body, _, _ := h.raw(req)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %q", resp.StatusCode, body)
		}
		d := h.waitDecisions(before + 1)[before]
		if d.BytesUp != int64(len(req)) || d.BytesDown != int64(len(body)) {
			t.Errorf("bytes up %d down %d, want %d (the whole request) and %d", d.BytesUp, d.BytesDown, len(req), len(body))
		}
		if want := "/v1/x?token=REDACTED&q=REDACTED"; d.Path != want {
			t.Errorf("path %q, want %q", d.Path, want)
		}
	}
}
