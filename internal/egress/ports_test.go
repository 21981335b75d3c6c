//go:build linux

package egress

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// TestPortEntry: "name:PORT" opens exactly that port for that name, for
// plain HTTP and CONNECT; the name's other ports and other names on that
// port stay closed, with a reason naming the entry to add.
func TestPortEntry(t *testing.T) {
	port, seen := hostUpstream(t)
	echo := echoServer(t)
	cfg := netpolicy.NewConfig([]string{".allowed.test", fmt.Sprintf("models.lan.test:%d", port), fmt.Sprintf("models.lan.test:%d", echo)}, []string{"127.0.0.1"})
	res := newResolver(map[string]string{"models.lan.test": "127.0.0.1", "api.allowed.test": "127.0.0.1"})
	t.Run("http", func(t *testing.T) {
		h := startGateway(t, cfg, res, true)
		resp, body, _, _ := h.raw(fmt.Sprintf("GET http://models.lan.test:%d/v1 HTTP/1.1\r\nHost: models.lan.test:%d\r\n\r\n", port, port))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %q", resp.StatusCode, body)
		}
		<-seen
		if d := h.waitDecisions(1)[0]; d.Decision != Allow || d.Rule != fmt.Sprintf("models.lan.test:%d 127.0.0.1/32", port) {
			t.Errorf("decision %+v", d)
		}
	})
	t.Run("connect", func(t *testing.T) {
		h := startGateway(t, cfg, res, true)
		resp, _, c, _ := h.connect(fmt.Sprintf("models.lan.test:%d", echo))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		c.Close()
		if d := h.waitDecisions(1)[0]; d.Decision != Allow || d.Rule != fmt.Sprintf("models.lan.test:%d 127.0.0.1/32", echo) {
			t.Errorf("decision %+v", d)
		}
	})
	refused := []struct{ name, req, reason string }{
		{"default port of a port entry", "GET http://models.lan.test/ HTTP/1.1\r\nHost: models.lan.test\r\n\r\n", `add "models.lan.test:80"`},
		{"connect 443 of a port entry", "CONNECT models.lan.test:443 HTTP/1.1\r\n\r\n", `rule "models.lan.test:`},
		{"another name on the port", fmt.Sprintf("GET http://api.allowed.test:%d/ HTTP/1.1\r\nHost: api.allowed.test:%d\r\n\r\n", port, port),
			fmt.Sprintf(`HTTP to port %d is not allowed for api.allowed.test: its rule ".allowed.test" opens HTTP 80, 443; CONNECT 443; to open this port add "api.allowed.test:%d"`, port, port)},
		{"another port", "CONNECT models.lan.test:11434 HTTP/1.1\r\n\r\n", "CONNECT to port 11434"},
		{"ip literal on the port", fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", echo), fmt.Sprintf("CONNECT to port %d is not allowed for IP literal 127.0.0.1", echo)},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver(map[string]string{"models.lan.test": "127.0.0.1"})
			h := startGateway(t, cfg, res, false)
			resp, body, _, _ := h.raw(tc.req)
			checkDenied(t, h, resp, body, 403, tc.reason)
			if got := res.looked(); len(got) != 0 {
				t.Errorf("looked up %v for a refused port", got)
			}
		})
	}
}

// TestIPPortEntry: "ADDRESS:PORT" opens that port for the IP literal.
func TestIPPortEntry(t *testing.T) {
	echo := echoServer(t)
	h := startGateway(t, netpolicy.NewConfig(nil, []string{fmt.Sprintf("127.0.0.1:%d", echo)}), newResolver(nil), true)
	resp, _, c, _ := h.connect(fmt.Sprintf("127.0.0.1:%d", echo))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	c.Close()
	if d := h.waitDecisions(1)[0]; d.Decision != Allow || d.Rule != fmt.Sprintf("127.0.0.1:%d", echo) {
		t.Errorf("decision %+v", d)
	}
}

// TestHostGatewayEntry: host.docker.internal:PORT lets the gateway dial
// the Docker host's private address on that port alone, recorded in the
// rule; other answers and other ports stay refused. Dialing is disabled:
// the address is this test's fiction.
func TestHostGatewayEntry(t *testing.T) {
	cfg := netpolicy.NewConfig([]string{".allowed.test", "host.docker.internal:11434"}, nil)
	cases := []struct {
		name, answer, req string
		dial              string
		reason            string
	}{
		{"http", "172.17.0.1", "GET http://host.docker.internal:11434/v1/models HTTP/1.1\r\nHost: host.docker.internal:11434\r\n\r\n", "172.17.0.1:11434", ""},
		{"connect", "172.17.0.1", "CONNECT host.docker.internal:11434 HTTP/1.1\r\n\r\n", "172.17.0.1:11434", ""},
		{"other port", "172.17.0.1", "CONNECT host.docker.internal:22 HTTP/1.1\r\n\r\n", "", "CONNECT to port 22"},
		{"loopback answer", "127.0.0.1", "CONNECT host.docker.internal:11434 HTTP/1.1\r\n\r\n", "", "loopback address 127.0.0.1"},
		{"metadata answer", "169.254.169.254", "CONNECT host.docker.internal:11434 HTTP/1.1\r\n\r\n", "", "link-local"},
		{"private answer for another name", "172.17.0.1", "CONNECT api.allowed.test:443 HTTP/1.1\r\n\r\n", "", "private address 172.17.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver(map[string]string{"host.docker.internal": tc.answer, "api.allowed.test": tc.answer})
			h := startGateway(t, cfg, res, false)
			resp, body, _, _ := h.raw(tc.req)
			if tc.reason != "" {
				checkDenied(t, h, resp, body, 403, tc.reason)
				return
			}
			if resp.StatusCode != 502 || !strings.Contains(body, "dialing disabled") {
				t.Errorf("got %d %q, want the harness's refused dial", resp.StatusCode, body)
			}
			if got := h.dialed(); len(got) != 1 || got[0] != tc.dial {
				t.Errorf("dialed %v, want [%s]", got, tc.dial)
			}
			d := h.waitDecisions(1)[0]
			if d.Decision != Allow || d.Rule != "host.docker.internal:11434 host-gateway" || d.ResolvedIP != "172.17.0.1" {
				t.Errorf("decision %+v", d)
			}
		})
	}
}
