//go:build linux

package egress

import (
	"strings"
	"testing"
)

// Found by the red team: net/http answered "OPTIONS *" itself (no decision
// line, connection kept open), so a request pipelined after it passed the
// Host check against the OPTIONS header block. Now OPTIONS * is the
// gateway's to refuse, with a line, and the connection ends there.
func TestOptionsStarCannotPrefixARequest(t *testing.T) {
	for _, second := range []string{
		"GET http://x.invalid/ HTTP/1.1\r\nHost: other.invalid\r\n\r\n",
		"CONNECT x.invalid:443 HTTP/1.1\r\nHost: other.invalid:443\r\n\r\n",
	} {
		h := startGateway(t, testConfig(false), newResolver(nil), false)
		resp, _, c, br := h.raw("OPTIONS * HTTP/1.1\r\nHost: x.invalid\r\n\r\n" + second)
		if resp.StatusCode < 400 {
			t.Errorf("OPTIONS * answered %d, want a refusal", resp.StatusCode)
		}
		if d := h.waitDecisions(1)[0]; d.Decision != Deny {
			t.Errorf("OPTIONS * decision %+v, want deny", d)
		}
		// The pipelined request must not be served on this connection.
		buf := make([]byte, 512)
		n, _ := br.Read(buf)
		if n > 0 && strings.Contains(string(buf[:n]), "HTTP/1.1") {
			t.Errorf("a second answer came on the same connection: %q", buf[:n])
		}
		c.Close()
	}
}
