package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sync"
	"testing"
)

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)

func TestTraceIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newTraceID()
		tp := traceparent(id)
		if !traceparentRE.MatchString(tp) || traceIDOf(tp) != id {
			t.Fatalf("traceparent(%q) = %q, want version 00, the id, a span, sampled", id, tp)
		}
		if seen[id] {
			t.Fatalf("trace id %s repeated", id)
		}
		seen[id] = true
	}
}

// A request to an https model API through the gateway carries the trace
// on the CONNECT request itself, the only part the gateway can read; and
// with keep-alives off, each request opens its own tunnel.
func TestTraceOnConnect(t *testing.T) {
	var mu sync.Mutex
	var got []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.Host+" "+traceIDOf(r.Header.Get("Traceparent")))
		mu.Unlock()
		http.Error(w, "denied: test gateway", http.StatusForbidden)
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	client := &http.Client{Transport: newTransport(func(*url.URL) (*url.URL, error) { return pu, nil }, false)}
	var want []string
	for range 2 {
		id := newTraceID()
		want = append(want, "CONNECT api.model.test:443 "+id)
		req, _ := http.NewRequestWithContext(withTrace(context.Background(), id), http.MethodPost, "https://api.model.test/v1/chat/completions", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("request through a refusing proxy succeeded")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("proxy saw %q, want %q", got, want)
	}
}
