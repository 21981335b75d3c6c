//go:build linux

package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// echoUpstream answers every request with its headers and body echoed:
// the header X-Echo-Auth holds the Authorization header it received, and
// the body holds every header line and then the request's body, written
// in chunks of chunk bytes (flushed), so values cross read boundaries.
func echoUpstream(t *testing.T, chunk int) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		for k, vs := range r.Header {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
		}
		io.Copy(&b, r.Body)
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Echo-Auth-B64", base64.StdEncoding.EncodeToString([]byte("Authorization: "+r.Header.Get("Authorization"))))
		data := b.Bytes()
		for len(data) > 0 {
			n := min(chunk, len(data))
			w.Write(data[:n])
			w.(http.Flusher).Flush()
			data = data[n:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReflectedValueScrubbed: an upstream that echoes the request hands
// the injected key back; the client reads none of it, in the headers or
// in the body however the body is cut into reads, and the line says
// reflected and where.
func TestReflectedValueScrubbed(t *testing.T) {
	for _, chunk := range []int{1, 3, 7, 4096} {
		t.Run(fmt.Sprintf("chunks of %d", chunk), func(t *testing.T) {
			srv := echoUpstream(t, chunk)
			h := startInjector(t, srv, true, "https")
			resp, body := h.send("/"+h.authority(srv)+"/v1/echo", http.Header{"Authorization": {"Bearer " + testPlaceholder}})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d %q", resp.StatusCode, body)
			}
			all := body
			for k, vs := range resp.Header {
				all += k + ": " + strings.Join(vs, ", ") + "\n"
			}
			for _, f := range valueForms(testSecret) {
				if strings.Contains(all, f.b) {
					t.Errorf("the answer holds the held value (%s): %q", f.form, all)
				}
			}
			if !strings.Contains(resp.Header.Get("X-Echo-Auth"), "Bearer ****") || !strings.Contains(body, "Bearer ****") {
				t.Errorf("want the value scrubbed in place: header %q, body %q; decision %s", resp.Header.Get("X-Echo-Auth"), body, h.log.String())
			}
			d := h.waitDecisions(1)[0]
			if d.Decision != Allow || d.Credential != CredentialReflected || !strings.Contains(d.HeldValue, "OPENAI_API_KEY") || !strings.Contains(d.HeldValue, "answer header") {
				t.Errorf("decision %+v, want allow, credential reflected, where", d)
			}
			if strings.Contains(h.log.String(), testSecret) {
				t.Error("the decision log holds the value")
			}
		})
	}
}

// TestCarriedValueRefused: a workload that has learned the value sends it
// through the proxy port to another allowed host, in every place and
// encoding a plain-HTTP request can carry it: refused, with a line saying
// carried and where, and nothing with the value reaches the upstream. The
// negative control: the same requests pass when the gateway holds no such
// value.
func TestCarriedValueRefused(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("Authorization: Bearer " + testSecret))
	every := ""
	for i := 0; i < len(testSecret); i++ {
		every += fmt.Sprintf("%%%02x", testSecret[i])
	}
	cases := []struct {
		name, target string
		header       http.Header
		body         string
	}{
		{"header", "/x", http.Header{"X-Key": {testSecret}}, ""},
		{"query", "/x?k=" + url.QueryEscape(testSecret), nil, ""},
		{"query, every byte escaped", "/x?k=" + every, nil, ""},
		{"path", "/x/" + url.PathEscape(testSecret), nil, ""},
		{"body", "/x", nil, `{"k":"` + testSecret + `"}`},
		{"body, percent-encoded", "/x", nil, "k=" + url.QueryEscape(testSecret)},
		{"body, base64 of the Authorization header", "/x", nil, auth},
		{"body, far in", "/x", nil, strings.Repeat("a", 100000) + testSecret},
		{"header, base64 (URL alphabet)", "/x", http.Header{"X-B": {base64.URLEncoding.EncodeToString([]byte("xx" + testSecret))}}, ""},
	}
	for _, held := range []bool{true, false} {
		t.Run(fmt.Sprintf("held=%v", held), func(t *testing.T) {
			var mu sync.Mutex
			var received []string
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				received = append(received, r.RequestURI+"\n"+fmt.Sprint(r.Header)+"\n"+string(b))
				mu.Unlock()
			}))
			t.Cleanup(up.Close)
			value := testSecret
			if !held {
				value = "another-secret-value"
			}
			h := startCarryRig(t, serverPort(up), value)
			for i, tc := range cases {
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://example.com:%d%s", serverPort(up), tc.target), strings.NewReader(tc.body))
				for k, vs := range tc.header {
					req.Header[k] = vs
				}
				resp, err := proxyClient(h, nil).Do(req)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := h.waitDecisions(i + 1)[i]
				switch {
				case !held && (d.Decision != Allow || resp.StatusCode != http.StatusOK):
					t.Errorf("%s, value not held: status %d, decision %+v, want it through", tc.name, resp.StatusCode, d)
				case held && (d.Decision != Deny || d.Credential != CredentialCarried || !strings.Contains(d.HeldValue, "OPENAI_API_KEY") || resp.StatusCode < 400):
					t.Errorf("%s: status %d, decision %+v, want refused, credential carried", tc.name, resp.StatusCode, d)
				}
			}
			h.g.Shutdown(context.Background())
			mu.Lock()
			defer mu.Unlock()
			if !held && len(received) != len(cases) {
				t.Errorf("value not held: the upstream received %d requests, want %d", len(received), len(cases))
			}
			for _, seen := range received {
				for _, f := range valueForms(testSecret) {
					if held && strings.Contains(seen, f.b) {
						t.Errorf("the upstream received the value (%s): %.200q", f.form, seen)
					}
				}
			}
		})
	}
}

// startCarryRig is a gateway holding one credential (value v, for a host
// the test never calls) whose proxy port allows example.com:port.
func startCarryRig(t *testing.T, port uint16, v string) *harness {
	t.Helper()
	cfg := netpolicy.NewConfig([]string{"example.com"}, []string{"127.0.0.1/32"})
	cfg.HTTPPorts = append(cfg.HTTPPorts, port)
	in := &Injection{Placeholder: testPlaceholder, Credentials: []Credential{{
		Host: "api.held.test", Scheme: "https", Header: "Authorization", Format: "Bearer {value}", Value: v, Source: "OPENAI_API_KEY",
	}}}
	return startGateway(t, cfg, newResolver(map[string]string{"example.com": "127.0.0.1"}), true, func(o *Options) { o.Injection = in })
}

// TestHeldReaderSplits: a value split across reads at every position is
// found, and no byte of it is passed on before it is.
func TestHeldReaderSplits(t *testing.T) {
	h := newHeldSearch([]*Credential{{Value: testSecret, Source: "K"}})
	text := "before " + testSecret + " after " + testSecret
	for _, scrub := range []bool{true, false} {
		for cut := 1; cut < len(text); cut++ {
			var seen []heldSeen
			hr := &heldReader{r: io.MultiReader(strings.NewReader(text[:cut]), strings.NewReader(text[cut:])), h: h, scrub: scrub, where: "body",
				seen: func(s heldSeen) { seen = append(seen, s) }}
			out, err := io.ReadAll(iotest.OneByteReader(hr))
			if strings.Contains(string(out), testSecret[:len(testSecret)-1]) {
				t.Fatalf("scrub %v, cut %d: passed on %q", scrub, cut, out)
			}
			if len(seen) == 0 {
				t.Fatalf("scrub %v, cut %d: not seen", scrub, cut)
			}
			if scrub && (err != nil || string(out) != "before "+strings.Repeat("*", len(testSecret))+" after "+strings.Repeat("*", len(testSecret))) {
				t.Fatalf("scrub, cut %d: %q, %v", cut, out, err)
			}
			if !scrub && err != errCarried {
				t.Fatalf("refuse, cut %d: err %v, want errCarried", cut, err)
			}
		}
	}
}

// TestHeldReaderNoHoldOnEvents: a streamed event that cannot begin a value
// is passed on at once (an SSE answer is not delayed by the search).
func TestHeldReaderNoHoldOnEvents(t *testing.T) {
	h := newHeldSearch([]*Credential{{Value: testSecret, Source: "K"}})
	pr, pw := io.Pipe()
	hr := &heldReader{r: pr, h: h, scrub: true, seen: func(heldSeen) {}}
	go pw.Write([]byte("data: {\"delta\":1}\n\n"))
	buf := make([]byte, 64)
	n, err := hr.Read(buf)
	if err != nil || string(buf[:n]) != "data: {\"delta\":1}\n\n" {
		t.Errorf("got %q, %v: want the whole event at once", buf[:n], err)
	}
	pw.Close()
}

// TestBase64Cores: the value is found inside the base64 of any text that
// holds it, at every alignment.
func TestBase64Cores(t *testing.T) {
	h := newHeldSearch([]*Credential{{Value: testSecret, Source: "K"}})
	for pre := range 6 {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			s := enc.EncodeToString([]byte(strings.Repeat("p", pre) + testSecret + "suffix"))
			if _, ok := h.findString(s); !ok {
				t.Errorf("prefix %d: %q not found", pre, s)
			}
		}
	}
	if _, ok := h.findString(base64.StdEncoding.EncodeToString([]byte("an ordinary text without it"))); ok {
		t.Error("found in a text without it")
	}
}

// rawInjector is a gateway whose credential (scheme http, value
// testSecret) goes to a raw loopback upstream that answers each request
// with answer(its Authorization value, the request), byte for byte.
func rawInjector(t *testing.T, answer func(auth string, r *http.Request) string) (*injectHarness, uint16, *[]*http.Request) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var got []*http.Request
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				mu.Lock()
				got = append(got, req)
				mu.Unlock()
				io.WriteString(c, answer(strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "), req))
			}()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	cfg := netpolicy.NewConfig([]string{"example.com"}, []string{"127.0.0.1/32"})
	cfg.HTTPPorts = append(cfg.HTTPPorts, port)
	in := &Injection{Placeholder: testPlaceholder, Credentials: []Credential{{
		Host: "example.com", Port: port, Scheme: "http", Header: "Authorization", Format: "Bearer {value}", Value: testSecret, Source: "OPENAI_API_KEY",
	}}}
	h := startGateway(t, cfg, newResolver(map[string]string{"example.com": "127.0.0.1"}), true, func(o *Options) { o.Injection = in })
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.g.ServeCredentials(cln)
	return &injectHarness{harness: h, credAddr: cln.Addr().String()}, port, &got
}

// rawCall sends one request to the credential listener and returns every
// byte of the answer, informational answers included.
func (h *injectHarness) rawCall(t *testing.T, port uint16, extra string) string {
	t.Helper()
	c, err := net.Dial("tcp", h.credAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /example.com:%d/v1/x HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer %s\r\n%sConnection: close\r\n\r\n", port, testPlaceholder, extra)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestReflectedPastTheAnswer: the ways an upstream's reflection reached
// the client unscrubbed in the red team of issue 27, each now scrubbed or
// refused, with the line saying reflected.
func TestReflectedPastTheAnswer(t *testing.T) {
	wrap := func(s string) string { // MIME wraps base64 at 76 columns; here at 20
		var b strings.Builder
		for len(s) > 20 {
			b.WriteString(s[:20] + "\r\n")
			s = s[20:]
		}
		return b.String() + s
	}
	cases := []struct {
		name     string
		answer   func(key string) string
		status   int
		reflects bool
	}{
		{"informational answer headers", func(k string) string {
			return "HTTP/1.1 103 Early Hints\r\nLink: <" + k + ">\r\nX-Key: " + k + "\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		}, 200, true},
		{"malformed status line", func(k string) string { return k + "\r\n\r\n" }, 502, true},
		{"malformed status code", func(k string) string { return "HTTP/1.1 " + k + "\r\n\r\n" }, 502, true},
		{"header with no colon", func(k string) string { return "HTTP/1.1 200 OK\r\n" + k + "\r\n\r\n" }, 502, true},
		{"bad Content-Length", func(k string) string { return "HTTP/1.1 200 OK\r\nContent-Length: " + k + "\r\n\r\n" }, 502, true},
		{"unknown Transfer-Encoding", func(k string) string { return "HTTP/1.1 200 OK\r\nTransfer-Encoding: " + k + "\r\n\r\n" }, 502, true},
		{"key as a Content-Encoding", func(k string) string {
			return "HTTP/1.1 200 OK\r\nContent-Encoding: " + k + "\r\nContent-Length: 2\r\n\r\nok"
		}, 502, true},
		{"a second Content-Encoding", func(k string) string {
			return "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nok"
		}, 502, false},
		{"key as a header name", func(k string) string { return "HTTP/1.1 200 OK\r\n" + k + ": x\r\nContent-Length: 2\r\n\r\nok" }, 200, true},
		{"base64 wrapped over lines", func(k string) string {
			body := wrap(base64.StdEncoding.EncodeToString([]byte("Authorization: Bearer " + k)))
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}, 200, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, port, _ := rawInjector(t, func(key string, _ *http.Request) string { return tc.answer(key) })
			got := h.rawCall(t, port, "")
			if strings.Contains(strings.ToLower(got), strings.ToLower(testSecret)) {
				t.Errorf("the client read the key:\n%s", got)
			}
			if !strings.Contains(got, fmt.Sprintf(" %d ", tc.status)) {
				t.Errorf("want status %d in:\n%s", tc.status, got)
			}
			d := h.waitDecisions(1)[0]
			if tc.reflects && d.Credential != CredentialReflected {
				t.Errorf("decision %+v, want credential reflected", d)
			}
			if strings.Contains(h.log.String(), testSecret) {
				t.Errorf("the decision log holds the key: %s", h.log.String())
			}
		})
	}
}

// TestRangeNotForwarded: a Range header would let an echoing upstream
// hand the key over in pieces no search recognises; the credential
// listener drops it.
func TestRangeNotForwarded(t *testing.T) {
	h, port, got := rawInjector(t, func(string, *http.Request) string { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" })
	h.rawCall(t, port, "Range: bytes=0-29\r\nIf-Range: x\r\n")
	h.waitDecisions(1)
	if r := (*got)[0]; r.Header.Get("Range") != "" || r.Header.Get("If-Range") != "" {
		t.Errorf("the upstream received Range %q, If-Range %q", r.Header.Get("Range"), r.Header.Get("If-Range"))
	}
}

// TestCarriedPastTheSearch: the request-side forms the red team of issue
// 27 got through the proxy port, each now refused.
func TestCarriedPastTheSearch(t *testing.T) {
	var mu sync.Mutex
	var received []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, r.RequestURI+" "+string(b))
		mu.Unlock()
	}))
	t.Cleanup(up.Close)
	port := serverPort(up)
	h := startCarryRig(t, port, testSecret)
	mime := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 50) + "note: " + testSecret))
	wrapped := mime[:76] + "\n" + mime[76:]
	half := url.QueryEscape(testSecret[:4]) + "%" + fmt.Sprintf("%02X", testSecret[4]) + testSecret[5:]
	for i, tc := range []struct{ name, raw string }{
		{"invalid escape before a partly escaped key in the query", fmt.Sprintf("GET http://example.com:%d/a?x=%%zz&k=%s HTTP/1.1\r\nHost: example.com:%d\r\n\r\n", port, half, port)},
		{"partly escaped key in the path after an invalid escape", fmt.Sprintf("GET http://example.com:%d/%s?%%zz HTTP/1.1\r\nHost: example.com:%d\r\n\r\n", port, half, port)},
		{"key as a header name", fmt.Sprintf("GET http://example.com:%d/a HTTP/1.1\r\nHost: example.com:%d\r\n%s: x\r\n\r\n", port, port, testSecret)},
		{"MIME-wrapped base64 body", fmt.Sprintf("POST http://example.com:%d/a HTTP/1.1\r\nHost: example.com:%d\r\nContent-Length: %d\r\n\r\n%s", port, port, len(wrapped), wrapped)},
	} {
		resp, body, _, _ := h.raw(tc.raw)
		d := h.waitDecisions(i + 1)[i]
		if resp.StatusCode < 400 || d.Credential != CredentialCarried {
			t.Errorf("%s: status %d %q, decision %+v; want refused, carried", tc.name, resp.StatusCode, body, d)
		}
	}
	h.g.Shutdown(context.Background())
	mu.Lock()
	defer mu.Unlock()
	for _, r := range received {
		dec, _ := base64.StdEncoding.DecodeString(strings.ReplaceAll(strings.Fields(r + " x")[1], "\n", ""))
		if strings.Contains(lenientUnescape(r, true), testSecret) || strings.Contains(string(dec), testSecret) {
			t.Errorf("the upstream received the key: %q", r)
		}
	}
}

// TestHeldReaderEnds: bytes held back as a value's beginning are never
// passed on as they are when the stream ends there: an answer's are
// scrubbed, a request is cut off, and after an error they are dropped.
func TestHeldReaderEnds(t *testing.T) {
	h := newHeldSearch([]*Credential{{Value: testSecret, Source: "K"}})
	prefix := testSecret[:9]
	for _, tc := range []struct {
		name    string
		scrub   bool
		tailErr error
		want    string
		wantErr error
	}{
		{"answer ends on a value's beginning", true, nil, "text " + strings.Repeat("*", len(prefix)), nil},
		{"request ends on a value's beginning", false, nil, "text ", errCarried},
		{"answer cut by an error", true, io.ErrUnexpectedEOF, "text ", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader("text " + prefix)
			if tc.tailErr != nil {
				r = io.MultiReader(r, iotest.ErrReader(tc.tailErr))
			}
			seen := 0
			hr := &heldReader{r: r, h: h, scrub: tc.scrub, seen: func(heldSeen) { seen++ }}
			out, err := io.ReadAll(hr)
			if string(out) != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("got %q, %v; want %q, %v", out, err, tc.want, tc.wantErr)
			}
			if tc.tailErr == nil && seen == 0 {
				t.Error("not noted as seen")
			}
		})
	}
}
