package agent

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRetryTransport(t *testing.T) {
	tests := []struct {
		name       string
		statuses   []int // answered in order; the last repeats
		wantStatus int
		wantCalls  int32
	}{
		{"ok", []int{200}, 200, 1},
		{"500 then ok", []int{500, 200}, 200, 2},
		{"429 twice then ok", []int{429, 429, 200}, 200, 3},
		{"408 then ok", []int{408, 200}, 200, 2},
		{"always 503: bounded", []int{503}, 503, 4},
		{"400 not retried", []int{400, 200}, 400, 1},
		{"401 not retried", []int{401, 200}, 401, 1},
		{"gateway refusal 403 not retried", []int{-403, 200}, 403, 1},
		{"gateway refusal 502 not retried", []int{-502, 200}, 502, 1},
		{"gateway upstream 502 retried", []int{-1502, 200}, 200, 2},
		{"gateway at capacity 503 retried", []int{-503, 200}, 200, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1)) - 1
				body, _ := io.ReadAll(r.Body)
				if string(body) != "payload" {
					t.Errorf("attempt %d got body %q", n, body)
				}
				switch st := tt.statuses[min(n, len(tt.statuses)-1)]; {
				case st == -1502:
					w.WriteHeader(502)
					io.WriteString(w, gatewayUpstream+"dial tcp 10.0.0.1:443: connection refused\n")
				case st < 0:
					w.WriteHeader(-st)
					io.WriteString(w, gatewayDenied+"host not in allowed_domains\n")
				default:
					w.WriteHeader(st)
				}
			}))
			defer srv.Close()
			c := &http.Client{Transport: retryTransport{next: http.DefaultTransport, retries: 3, base: time.Millisecond, timeout: 5 * time.Second}}
			resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("payload"))
			status := 0
			var me *modelError
			switch {
			case err == nil:
				resp.Body.Close()
				status = resp.StatusCode
			case errors.As(err, &me):
				status = me.Status
				if me.Retries != int(calls.Load())-1 {
					t.Errorf("error says %d retries after %d calls", me.Retries, calls.Load())
				}
			default:
				t.Fatal(err)
			}
			if status != tt.wantStatus || calls.Load() != tt.wantCalls {
				t.Errorf("status %d after %d calls, want %d after %d", status, calls.Load(), tt.wantStatus, tt.wantCalls)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tr := retryTransport{base: time.Second}
	tests := []struct {
		attempt    int
		retryAfter string
		want       time.Duration
	}{
		{0, "", time.Second},
		{2, "", 4 * time.Second},
		{0, "7", 7 * time.Second},
		{3, "1", 8 * time.Second},
		{0, "3600", maxBackoff},
		{10, "", maxBackoff},
		{0, "soon", time.Second},
		{0, time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat), 9 * time.Second}, // an HTTP date, to the second
	}
	for _, tt := range tests {
		if got := tr.backoff(tt.attempt, tt.retryAfter); got != tt.want && (got < tt.want || got > tt.want+time.Second) {
			t.Errorf("backoff(%d, %q) = %s, want %s", tt.attempt, tt.retryAfter, got, tt.want)
		}
	}
}

// The per-attempt timeout ends a hung request instead of waiting forever.
func TestRetryTransportTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := &http.Client{Transport: retryTransport{next: http.DefaultTransport, retries: 3, base: time.Millisecond, timeout: 50 * time.Millisecond}}
	start := time.Now()
	_, err := c.Get(srv.URL)
	if err == nil || !strings.Contains(err.Error(), "deadline") || time.Since(start) > 5*time.Second {
		t.Errorf("err = %v after %s, want a deadline error soon", err, time.Since(start))
	}
}

// A connection the server resets is tried again.
func TestRetryTransportConnectionReset(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.(*net.TCPConn).SetLinger(0) // close with RST
			conn.Close()
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := &http.Client{Transport: retryTransport{next: http.DefaultTransport, retries: 3, base: time.Millisecond, timeout: 5 * time.Second}}
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatalf("after a reset: %v", err)
	}
	resp.Body.Close()
	if calls.Load() != 2 {
		t.Errorf("%d calls, want 2", calls.Load())
	}
}
