//go:build linux

package egress

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// checkDenied asserts the response, the decision line, and that nothing
// was looked up or dialed when lookups is nil.
func checkDenied(t *testing.T, h *harness, resp *http.Response, body string, status int, reason string) Decision {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d (body %q)", resp.StatusCode, status, body)
	}
	if !strings.Contains(body, reason) {
		t.Errorf("body %q does not name the reason %q", body, reason)
	}
	ds := h.waitDecisions(1)
	d := ds[0]
	if d.Decision != Deny || !strings.Contains(d.Reason, reason) {
		t.Errorf("decision %+v, want deny with reason containing %q", d, reason)
	}
	if len(h.dialed()) != 0 {
		t.Errorf("dialed %v for a denied request", h.dialed())
	}
	return d
}

func TestDeniedNameNeverResolved(t *testing.T) {
	names := []string{"denied.test", "allowed.test.evil.example", "notallowed.test", "sub.exact.example", "exact.example.invalid", "xn--llowed-2nf.test"}
	for _, name := range names {
		for _, connect := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/connect=%v", name, connect), func(t *testing.T) {
				res := newResolver(map[string]string{name: "127.0.0.1"})
				h := startGateway(t, testConfig(true), res, false)
				var resp *http.Response
				var body string
				if connect {
					resp, body, _, _ = h.connect(name + ":443")
				} else {
					resp, body, _, _ = h.raw(fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", name, name))
				}
				checkDenied(t, h, resp, body, 403, "not in allowed_domains")
				if got := res.looked(); len(got) != 0 {
					t.Errorf("denied name was looked up: %v", got)
				}
			})
		}
	}
}

func TestRefusedResolvedAddresses(t *testing.T) {
	cases := []struct{ answer, class string }{
		{"127.0.0.1", "loopback"},
		{"127.0.0.53", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "link-local"},
		{"100.64.0.1", "cgnat"},
		{"100.100.100.200", "cgnat"},
		{"0.0.0.0", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"::1", "loopback"},
		{"::", "unspecified"},
		{"fd00::1", "private"},
		{"fe80::1", "link-local"},
		{"64:ff9b::7f00:1", "embedded-ipv4"},
		{"64:ff9b::a9fe:a9fe", "embedded-ipv4"},
		{"2002:7f00:1::1", "embedded-ipv4"},
		// Go may hand back IPv4 answers IPv4-mapped; the gateway judges the
		// IPv4 form, which here is loopback.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "link-local"},
		{"192.0.2.1", "documentation"},
	}
	for _, tc := range cases {
		for _, connect := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/connect=%v", tc.answer, connect), func(t *testing.T) {
				res := newResolver(map[string]string{"api.allowed.test": tc.answer})
				h := startGateway(t, testConfig(false), res, false)
				var resp *http.Response
				var body string
				if connect {
					resp, body, _, _ = h.connect("api.allowed.test:443")
				} else {
					resp, body, _, _ = h.raw("GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n")
				}
				d := checkDenied(t, h, resp, body, 403, tc.class)
				if got := res.looked(); len(got) != 1 {
					t.Errorf("lookups %v, want exactly one", got)
				}
				if d.ResolvedIP == "" {
					t.Error("refused address not recorded in resolved_ip")
				}
			})
		}
	}
}

// TestMixedAnswerRefused: one refused address among the answers refuses
// the request, even when another answer would be allowed.
func TestMixedAnswerRefused(t *testing.T) {
	res := newResolver(map[string]string{"api.allowed.test": "127.0.0.1 10.0.0.1"})
	h := startGateway(t, testConfig(true), res, false)
	resp, body, _, _ := h.connect("api.allowed.test:443")
	d := checkDenied(t, h, resp, body, 403, "private address 10.0.0.1")
	if d.ResolvedIP != "10.0.0.1" {
		t.Errorf("resolved_ip %q, want the refused 10.0.0.1", d.ResolvedIP)
	}
}

func TestPorts(t *testing.T) {
	cases := []struct {
		name, req, reason string
	}{
		{"connect 80", "CONNECT api.allowed.test:80 HTTP/1.1\r\nHost: api.allowed.test:80\r\n\r\n", "CONNECT to port 80"},
		{"connect 22", "CONNECT api.allowed.test:22 HTTP/1.1\r\nHost: api.allowed.test:22\r\n\r\n", "CONNECT to port 22"},
		{"connect 8443", "CONNECT api.allowed.test:8443 HTTP/1.1\r\n\r\n", "CONNECT to port 8443"},
		{"connect no port", "CONNECT api.allowed.test HTTP/1.1\r\n\r\n", "not host:port"},
		{"connect port 0", "CONNECT api.allowed.test:0 HTTP/1.1\r\n\r\n", "not a port number"},
		{"connect port huge", "CONNECT api.allowed.test:70000 HTTP/1.1\r\n\r\n", "not a port number"},
		{"http 22", "GET http://api.allowed.test:22/ HTTP/1.1\r\nHost: api.allowed.test:22\r\n\r\n", "HTTP to port 22"},
		{"http 8080", "GET http://api.allowed.test:8080/ HTTP/1.1\r\nHost: api.allowed.test:8080\r\n\r\n", "HTTP to port 8080"},
		{"ftp scheme", "GET ftp://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n", "scheme \"ftp\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver(map[string]string{"api.allowed.test": "127.0.0.1"})
			h := startGateway(t, testConfig(true), res, false)
			resp, body, _, _ := h.raw(tc.req)
			if resp.StatusCode != 403 && resp.StatusCode != 400 {
				t.Errorf("status %d", resp.StatusCode)
			}
			checkDenied(t, h, resp, body, resp.StatusCode, tc.reason)
			if got := res.looked(); len(got) != 0 {
				t.Errorf("looked up %v for a refused port", got)
			}
		})
	}
}

func TestIPLiterals(t *testing.T) {
	cases := []struct{ host, reason string }{
		{"127.0.0.1", "IP literal 127.0.0.1 is not in allowed_ip_addresses"},
		{"169.254.169.254", "IP literal 169.254.169.254"},
		{"10.0.0.1", "IP literal 10.0.0.1"},
		{"[::1]", "IP literal ::1"},
		{"[::ffff:127.0.0.1]", "IP literal ::ffff:127.0.0.1"},
		{"[::ffff:7f00:1]", "IP literal ::ffff:127.0.0.1"},
		{"[64:ff9b::7f00:1]", "IP literal 64:ff9b::7f00:1"},
		{"[0:0:0:0:0:0:0:1]", "IP literal ::1"},
		{"[fe80::1%25eth0]", "invalid host"},
		{"2130706433", "invalid host"},
		{"0x7f000001", "invalid host"},
		{"0x7f.0.0.1", "invalid host"},
		{"0177.0.0.1", "invalid host"},
		{"127.1", "invalid host"},
		{"127.0.0.01", "invalid host"},
		{"017700000001", "invalid host"},
		{"1.2.3.4.5", "invalid host"},
	}
	for _, tc := range cases {
		for _, connect := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/connect=%v", tc.host, connect), func(t *testing.T) {
				res := newResolver(nil)
				h := startGateway(t, testConfig(false), res, false)
				var resp *http.Response
				var body string
				if connect {
					resp, body, _, _ = h.raw(fmt.Sprintf("CONNECT %s:443 HTTP/1.1\r\n\r\n", tc.host))
				} else {
					resp, body, _, _ = h.raw(fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", tc.host, tc.host))
				}
				if resp.StatusCode == 400 && !strings.Contains(body, "denied") {
					// net/http itself refused the request line: still never
					// resolved nor dialed, but there is no decision to read.
					t.Logf("refused by the HTTP parser: %q", body)
				} else if d := checkDenied(t, h, resp, body, 403, tc.reason); d.Host == "" {
					t.Error("decision does not record the requested host")
				}
				if got := res.looked(); len(got) != 0 {
					t.Errorf("looked up %v for an IP literal", got)
				}
				if len(h.dialed()) != 0 {
					t.Errorf("dialed %v", h.dialed())
				}
			})
		}
	}
}

func TestUserinfoRefused(t *testing.T) {
	cases := []struct{ name, req string }{
		{"http user:pass", "GET http://user:pass@api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n"},
		{"http user only", "GET http://user@api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n"},
		{"http at denied host", "GET http://api.allowed.test@evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n"},
		{"connect", "CONNECT user@api.allowed.test:443 HTTP/1.1\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver(map[string]string{"api.allowed.test": "127.0.0.1"})
			h := startGateway(t, testConfig(true), res, false)
			resp, body, _, _ := h.raw(tc.req)
			checkDenied(t, h, resp, body, 403, "user information")
			if got := res.looked(); len(got) != 0 {
				t.Errorf("looked up %v", got)
			}
		})
	}
}

func TestHostHeaderMismatch(t *testing.T) {
	cases := []struct{ name, req, reason string }{
		{"other host", "GET http://api.allowed.test/ HTTP/1.1\r\nHost: metadata.google.internal\r\n\r\n", "disagrees"},
		{"other allowed host", "GET http://api.allowed.test/ HTTP/1.1\r\nHost: exact.example\r\n\r\n", "disagrees"},
		{"other port", "GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test:8080\r\n\r\n", "disagrees"},
		{"ip host", "GET http://api.allowed.test/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", "disagrees"},
		{"two hosts", "GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\nHost: evil.example\r\n\r\n", "Host headers"},
		{"connect other", "CONNECT api.allowed.test:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", "disagrees"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver(map[string]string{"api.allowed.test": "127.0.0.1"})
			h := startGateway(t, testConfig(true), res, false)
			resp, body, _, _ := h.raw(tc.req)
			if resp.StatusCode == 400 && !strings.Contains(body, "denied") {
				t.Logf("refused by the HTTP parser: %q", body)
			} else {
				checkDenied(t, h, resp, body, resp.StatusCode, tc.reason)
			}
			if got := res.looked(); len(got) != 0 {
				t.Errorf("looked up %v", got)
			}
		})
	}
}

// TestHostHeaderAgrees shows the check does not refuse equivalent
// spellings: case, default port, trailing dot.
func TestHostHeaderAgrees(t *testing.T) {
	_, port, _ := upstream(t, false)
	for _, host := range []string{"api.allowed.test:%d", "API.Allowed.Test:%d", "api.allowed.test.:%d"} {
		t.Run(host, func(t *testing.T) {
			h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true)
			resp, body, _, _ := h.raw(fmt.Sprintf("GET http://api.allowed.test:%d/ HTTP/1.1\r\nHost: "+host+"\r\n\r\n", port, port))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
		})
	}
}
