//go:build linux

package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowUpstream answers every request after delay (or when the test ends),
// and reports on started each request it received.
func slowUpstream(t *testing.T, delay time.Duration) (port uint16, started <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 8)
	done := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch <- struct{}{}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		case <-done:
		}
		fmt.Fprintln(w, "slow answer")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { close(done); srv.Close() })
	return uint16(ln.Addr().(*net.TCPAddr).Port), ch
}

// TestShutdownInterruptsForward: a forwarded request in flight when the
// gateway shuts down is cancelled at once, and its decision line (allow,
// error "interrupted: ...", its correlation id) is written before
// Shutdown returns, well inside the wait it was given.
func TestShutdownInterruptsForward(t *testing.T) {
	port, started := slowUpstream(t, 30*time.Second)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"slow.allowed.test": "127.0.0.1"}), true)
	got := make(chan int, 1)
	req := fmt.Sprintf("POST http://slow.allowed.test:%d/mcp HTTP/1.1\r\nHost: slow.allowed.test:%d\r\nTraceparent: %s\r\nContent-Length: 2\r\n\r\n{}", port, port, testTraceparent)
	go func() {
		resp, _, _, _ := h.raw(req)
		got <- resp.StatusCode
	}()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the upstream")
	}
	if n := len(h.decisions()); n != 0 {
		t.Fatalf("%d decision lines before the request ended, want 0", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownWait)
	defer cancel()
	began := time.Now()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Shutdown took %v with a request in flight, want it cancelled at once", took)
	}
	ds := h.decisions()
	if len(ds) != 1 {
		t.Fatalf("%d decision lines by the end of Shutdown, want 1", len(ds))
	}
	d := ds[0]
	if d.Decision != Allow || !strings.HasPrefix(d.Error, ErrorInterrupted+":") || d.CorrelationID != testTraceID || d.BytesUp != int64(len(req)) {
		t.Errorf("decision = %+v, want allow, error %q..., correlation id %s, %d bytes up (the whole request)", d, ErrorInterrupted, testTraceID, len(req))
	}
	if code := <-got; code != http.StatusBadGateway {
		t.Errorf("client got status %d, want 502", code)
	}
}

// TestShutdownInterruptsTunnel: a tunnel open at shutdown gets its
// decision line, marked interrupted.
func TestShutdownInterruptsTunnel(t *testing.T) {
	echo := echoServer(t)
	h := startGateway(t, testConfig(true, echo), newResolver(map[string]string{"echo.allowed.test": "127.0.0.1"}), true)
	resp, _, _, _ := h.connect(fmt.Sprintf("echo.allowed.test:%d", echo))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownWait)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ds := h.decisions()
	if len(ds) != 1 || !strings.HasPrefix(ds[0].Error, ErrorInterrupted+":") {
		t.Fatalf("decisions = %+v, want one, interrupted", ds)
	}
}

// TestFinishedForwardNotInterrupted: a request answered before shutdown
// keeps an ordinary decision line.
func TestFinishedForwardNotInterrupted(t *testing.T) {
	port, _ := slowUpstream(t, 0)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"slow.allowed.test": "127.0.0.1"}), true)
	resp, _, _, _ := h.raw(fmt.Sprintf("GET http://slow.allowed.test:%d/ HTTP/1.1\r\nHost: slow.allowed.test:%d\r\n\r\n", port, port))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	d := h.waitDecisions(1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownWait)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d.Error != "" {
		t.Errorf("decision error %q, want none", d.Error)
	}
}
