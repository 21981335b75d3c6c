//go:build linux

package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// withBudget lowers the harness's decision-log budget to n bytes.
func withBudget(n int64) harnessOpt { return func(o *Options) { o.Log.SetBudget(n) } }

// fillLog sends denied requests until the gateway answers one with 503
// (the log is full); it fails the test after max requests.
func fillLog(t *testing.T, h *harness, max int) int {
	t.Helper()
	for i := 1; i <= max; i++ {
		resp, body, _, _ := h.raw(fmt.Sprintf("GET http://denied%d.example/ HTTP/1.1\r\nHost: denied%d.example\r\n\r\n", i, i))
		if resp.StatusCode == http.StatusServiceUnavailable {
			if !strings.Contains(body, ReasonLogFull) {
				t.Fatalf("503 body %q does not say %q", body, ReasonLogFull)
			}
			return i
		}
	}
	t.Fatalf("the log was not full after %d denied requests", max)
	return 0
}

// checkMarkerLast: every line parses, only the last is the marker, and
// the log stays within its budget plus the headroom.
func checkMarkerLast(t *testing.T, log string, budget int64) Decision {
	t.Helper()
	if int64(len(log)) > budget+LogHeadroom {
		t.Errorf("log is %d bytes, over the %d-byte budget plus %d headroom", len(log), budget, LogHeadroom)
	}
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	var last Decision
	for i, line := range lines {
		var d Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		if d.LogFull != (i == len(lines)-1) {
			t.Errorf("line %d: log_full %v, want it on the last line only", i+1, d.LogFull)
		}
		last = d
	}
	if last.Decision != Deny || !strings.HasPrefix(last.Reason, ReasonLogFull) || last.RunID != "run-test" {
		t.Errorf("marker %+v", last)
	}
	return last
}

// TestLogFullRefusesEverything: the red team's fill (finding 1). Once a
// denied request's line no longer fits the budget, the log ends with its
// marker and every later request, allowed ones, the credential-free
// probe and CONNECT included, is refused with 503 before anything is
// dialed or sent upstream.
func TestLogFullRefusesEverything(t *testing.T) {
	_, port, seen := upstream(t, false)
	const budget = 2000
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true, withBudget(budget))
	n := fillLog(t, h, 50)
	if n < 2 {
		t.Fatalf("full after %d requests: the budget let no line through", n)
	}
	checkMarkerLast(t, h.log.String(), budget)
	logged := h.log.String()
	target := fmt.Sprintf("api.allowed.test:%d", port)
	for _, req := range []string{
		fmt.Sprintf("GET http://%s/secret-after-fill HTTP/1.1\r\nHost: %s\r\n\r\n", target, target),
		fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target),
		"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n",
	} {
		resp, body, _, _ := h.raw(req)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, ReasonLogFull) {
			t.Errorf("%q: got %d %q, want 503 %q", strings.SplitN(req, "\r", 2)[0], resp.StatusCode, body, ReasonLogFull)
		}
	}
	select {
	case <-seen:
		t.Error("the upstream received a request after the log was full")
	default:
	}
	if d := h.dialed(); len(d) != 0 {
		t.Errorf("dialed %v after the log was full", d)
	}
	if got := h.log.String(); got != logged {
		t.Errorf("the log grew after its marker:\n%s", strings.TrimPrefix(got, logged))
	}
	if !errors.Is(h.g.log.Full(), ErrLogFull) {
		t.Errorf("Full() = %v", h.g.log.Full())
	}
}

// TestLogFullNamesTheLostLine: an allowed request is forwarded, and its
// line is written when it ends; when that line does not fit, the marker
// names the request it lost, and the next allowed request is refused.
func TestLogFullNamesTheLostLine(t *testing.T) {
	_, port, seen := upstream(t, false)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true, withBudget(1))
	target := fmt.Sprintf("api.allowed.test:%d", port)
	get := fmt.Sprintf("GET http://%s/first HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	if resp, _, _, _ := h.raw(get); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	<-seen
	marker := checkMarkerLast(t, h.log.String(), 1)
	if want := "the allow request GET api.allowed.test:" + fmt.Sprint(port); !strings.Contains(marker.Reason, want) {
		t.Errorf("marker reason %q does not name %q", marker.Reason, want)
	}
	if resp, _, _, _ := h.raw(get); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second request: %d, want 503", resp.StatusCode)
	}
	select {
	case <-seen:
		t.Error("the second request reached the upstream")
	default:
	}
}

// TestLogFullCutsInFlight: a tunnel and a forwarded request open when the
// log fills are cut off at once.
func TestLogFullCutsInFlight(t *testing.T) {
	echo := echoServer(t)
	slow, started := slowUpstream(t, time.Minute)
	cfg := testConfig(true, echo, slow)
	h := startGateway(t, cfg, newResolver(map[string]string{"echo.allowed.test": "127.0.0.1", "slow.allowed.test": "127.0.0.1"}), true, withBudget(3000))
	resp, _, tun, br := h.connect(fmt.Sprintf("echo.allowed.test:%d", echo))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	slowDone := make(chan int, 1)
	go func() {
		target := fmt.Sprintf("slow.allowed.test:%d", slow)
		r, _, _, _ := h.raw(fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", target, target))
		slowDone <- r.StatusCode
	}()
	<-started
	fillLog(t, h, 50)
	tun.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("tunnel still open after the log filled: %v", err)
	}
	select {
	case code := <-slowDone:
		if code == http.StatusOK {
			t.Errorf("forwarded request in flight: %d, want it cut off", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("forwarded request in flight not cut off")
	}
}

// failingWriter writes the first n bytes it is given, then fails once
// with err (as write(2) does at RLIMIT_FSIZE), then takes everything.
type failingWriter struct {
	syncBuffer
	n      int
	err    error
	failed bool
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if !w.failed && w.n < len(p) {
		w.failed = true
		w.syncBuffer.Write(p[:w.n])
		return w.n, w.err
	}
	w.n -= len(p)
	return w.syncBuffer.Write(p)
}

// TestLogWriteErrorRefusesEverything: any failed write (EFBIG, EIO) puts
// the gateway in the same state as a full log, and the marker starts a
// line of its own after the cut one.
func TestLogWriteErrorRefusesEverything(t *testing.T) {
	_, port, seen := upstream(t, false)
	w := &failingWriter{n: 10, err: syscall.EIO}
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true,
		func(o *Options) { o.Log = NewDecisionLog(w) })
	if resp, _, _, _ := h.raw("GET http://denied.example/ HTTP/1.1\r\nHost: denied.example\r\n\r\n"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("denied request: %d", resp.StatusCode)
	}
	target := fmt.Sprintf("api.allowed.test:%d", port)
	resp, body, _, _ := h.raw(fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", target, target))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, ReasonLogFull) {
		t.Errorf("allowed request after the failed write: %d %q", resp.StatusCode, body)
	}
	select {
	case <-seen:
		t.Error("the upstream received a request after the failed write")
	default:
	}
	lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) != 10 {
		t.Fatalf("log %q: want the cut line, then the marker", w.String())
	}
	var m Decision
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || !m.LogFull || !strings.Contains(m.Reason, "input/output error") {
		t.Errorf("marker %q (%v)", lines[1], err)
	}
}

// TestLogFullMarkerFitsHeadroom: a lost line whose host is all control
// characters (six bytes each once escaped) still leaves a marker within
// the headroom.
func TestLogFullMarkerFitsHeadroom(t *testing.T) {
	var buf syncBuffer
	l := NewDecisionLog(&buf)
	l.SetBudget(1)
	d := Decision{RunID: strings.Repeat("\x01", 128), Method: strings.Repeat("\x01", 32), Host: strings.Repeat("\x01", 255),
		Client: strings.Repeat("\x01", 64), Decision: Deny}
	if err := l.Record(d); !errors.Is(err, ErrLogFull) {
		t.Fatalf("Record = %v", err)
	}
	if n := len(buf.String()); n == 0 || n > LogHeadroom {
		t.Errorf("marker is %d bytes, want 1..%d", n, LogHeadroom)
	}
}
