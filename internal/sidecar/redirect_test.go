//go:build linux

package sidecar

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learnfake"
)

// countingServer counts the requests it receives; a redirect target must
// receive none.
func countingServer(t *testing.T) (*atomic.Int64, *httptest.Server) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, "the redirect target must never be reached", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return &n, srv
}

// redirector answers with status and a Location on target when redirect
// says so, and passes everything else to next. It counts what it redirects.
type redirector struct {
	status   int
	target   string
	redirect func(*http.Request) bool
	next     http.Handler
	count    atomic.Int64
}

func (h *redirector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.redirect(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	h.count.Add(1)
	http.Redirect(w, r, h.target+r.URL.Path, h.status)
}

func always(*http.Request) bool { return true }

// isToolCall reports whether r carries a tools/call (the session is
// already up: initialize and tools/list went through).
func isToolCall(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return bytes.Contains(body, []byte(`"method":"tools/call"`))
}

// TestUpstreamRedirectRefused: an upstream that redirects, at session start
// or on a call, gets no request followed to the Location host; the tool
// call fails with an error naming the status and that host, and its audit
// record says so (issue 12 item 6).
func TestUpstreamRedirectRefused(t *testing.T) {
	search := map[string]any{"query": "secret-ish argument"}
	tests := []struct {
		name     string
		status   int
		redirect func(*http.Request) bool
		tool     string
		args     map[string]any
	}{
		{"302 at session start", http.StatusFound, always, learn.ToolDocsSearch, search},
		{"307 at session start", http.StatusTemporaryRedirect, always, learn.ToolDocsSearch, search},
		{"308 on the call", http.StatusPermanentRedirect, isToolCall, learn.ToolDocsSearch, search},
		{"301 on the call", http.StatusMovedPermanently, isToolCall, learn.ToolCodeSampleSearch, search},
		{"303 on the call", http.StatusSeeOther, isToolCall, learn.ToolDocsSearch, search},
		{"307 on a fetch", http.StatusTemporaryRedirect, isToolCall, learn.ToolDocsFetch, map[string]any{"url": "https://127.0.0.1/dotnet/"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits, target := countingServer(t)
			fake := learnfake.New(learnfake.Options{})
			rd := &redirector{status: tc.status, target: target.URL, redirect: tc.redirect, next: fake.Handler()}
			up := httptest.NewServer(rd)
			t.Cleanup(up.Close)
			ts := startSidecar(t, Config{UpstreamURL: up.URL + "/mcp"})
			cs := connect(t, ts.URL, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")

			got, isErr := callText(t, cs, tc.tool, tc.args)
			targetHost := strings.TrimPrefix(target.URL, "http://")
			for _, want := range []string{"redirect", "HTTP " + strconv.Itoa(tc.status), targetHost} {
				if !isErr || !strings.Contains(got, want) {
					t.Fatalf("call = %q (isError %v), want a tool error containing %q", got, isErr, want)
				}
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the redirect target received %d requests, want 0", n)
			}
			// A redirected call is not retried: a second attempt would only
			// be redirected again. (A redirected session start is attempted
			// again by the next call, as any failed connect is.)
			if n := rd.count.Load(); tc.status != http.StatusFound && tc.status != http.StatusTemporaryRedirect && n != 1 {
				t.Errorf("the upstream redirected %d requests, want 1 (no retry)", n)
			}
			if len(fake.Calls()) != 0 {
				t.Errorf("the upstream ran the tool: %+v", fake.Calls())
			}
			if err := ts.stop(); err != nil {
				t.Fatal(err)
			}
			recs := readAudit(t, ts.AuditPath)
			if len(recs) != 1 || recs[0].OK || recs[0].Name != tc.tool ||
				!strings.Contains(recs[0].Error, strconv.Itoa(tc.status)) || !strings.Contains(recs[0].Error, targetHost) {
				t.Fatalf("audit = %+v, want one failed %s record naming %d and %s", recs, tc.tool, tc.status, targetHost)
			}
		})
	}
}

// TestUpstreamClientFollowsNoRedirect: every request the upstream client
// can make (the SDK's POSTs, the standalone-stream GET, the DELETE that ends
// a session) comes back as a *RedirectError; the target sees nothing.
func TestUpstreamClientFollowsNoRedirect(t *testing.T) {
	hits, target := countingServer(t)
	for _, status := range []int{301, 302, 303, 307, 308} {
		rd := &redirector{status: status, target: target.URL, redirect: always}
		up := httptest.NewServer(rd)
		u := newUpstream(Config{UpstreamURL: up.URL + "/mcp", MaxUpstreamBytes: 1 << 20}, nil)
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			req, _ := http.NewRequestWithContext(withTraceID(context.Background(), newTraceID()), method, up.URL+"/mcp", strings.NewReader("{}"))
			resp, err := u.http.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			var re *RedirectError
			if !errors.As(err, &re) || re.Status != status || re.Location != strings.TrimPrefix(target.URL, "http://") {
				t.Errorf("%s answered %d: err = %v, want a *RedirectError naming %d and the target's host", method, status, err, status)
			}
		}
		up.Close()
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect target received %d requests, want 0", n)
	}
}

// TestRedirectErrorText covers a relative Location (resolved against the
// upstream) and a missing one.
func TestRedirectErrorText(t *testing.T) {
	req := &http.Request{URL: &url.URL{Scheme: "https", Host: "learn.microsoft.com", Path: "/api/mcp"}}
	tests := []struct {
		loc, want string
	}{
		{"/elsewhere", "upstream answered HTTP 302, a redirect (Location host learn.microsoft.com); the sidecar follows no redirects"},
		{"https://evil.test:8443/x", "upstream answered HTTP 302, a redirect (Location host evil.test:8443); the sidecar follows no redirects"},
		{"", "upstream answered HTTP 302, a redirect (no Location header); the sidecar follows no redirects"},
	}
	for _, tc := range tests {
		resp := &http.Response{StatusCode: 302, Header: http.Header{}, Request: req}
		if tc.loc != "" {
			resp.Header.Set("Location", tc.loc)
		}
		if got := redirectError(resp).Error(); got != tc.want {
			t.Errorf("Location %q: got %q, want %q", tc.loc, got, tc.want)
		}
	}
}

// TestUpstreamReconnectFollowsNoRedirect: the upstream restarts (it forgets
// the session, so the call's retry reconnects) and answers the reconnect
// with a redirect; the reconnect is refused like any other request and the
// target sees nothing.
func TestUpstreamReconnectFollowsNoRedirect(t *testing.T) {
	hits, target := countingServer(t)
	var restarted atomic.Bool
	before, after := learnfake.New(learnfake.Options{}), learnfake.New(learnfake.Options{})
	rd := &redirector{status: http.StatusTemporaryRedirect, target: target.URL, redirect: func(r *http.Request) bool {
		return restarted.Load() && !isToolCall(r)
	}}
	rd.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if restarted.Load() {
			after.Handler().ServeHTTP(w, r) // does not know the old session: 404
			return
		}
		before.Handler().ServeHTTP(w, r)
	})
	up := httptest.NewServer(rd)
	t.Cleanup(up.Close)
	ts := startSidecar(t, Config{UpstreamURL: up.URL + "/mcp"})
	cs := connect(t, ts.URL, "")
	args := map[string]any{"query": "HttpClient"}
	if got, isErr := callText(t, cs, learn.ToolDocsSearch, args); isErr {
		t.Fatalf("first call: %q, want the canned result", got)
	}
	restarted.Store(true)
	got, isErr := callText(t, cs, learn.ToolDocsSearch, args)
	if !isErr || !strings.Contains(got, "connecting to upstream") || !strings.Contains(got, "redirect") ||
		!strings.Contains(got, strings.TrimPrefix(target.URL, "http://")) {
		t.Fatalf("call after the restart = %q (isError %v), want a redirect refused at reconnect", got, isErr)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect target received %d requests, want 0", n)
	}
}
