//go:build linux

package egress

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestForwardVerifiesTLS: an https absolute URI is forwarded with TLS
// verification on, so an upstream with an untrusted certificate fails.
func TestForwardVerifiesTLS(t *testing.T) {
	_, port, seen := upstream(t, true)
	h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true)
	resp, body, _, _ := h.raw(fmt.Sprintf("GET https://api.allowed.test:%d/ HTTP/1.1\r\nHost: api.allowed.test:%d\r\n\r\n", port, port))
	if resp.StatusCode != 502 || !strings.Contains(body, "certificate") {
		t.Errorf("got %d %q, want 502 naming the certificate", resp.StatusCode, body)
	}
	select {
	case <-seen:
		t.Error("the upstream answered a request over unverified TLS")
	default:
	}
	d := h.waitDecisions(1)[0]
	if d.Decision != Allow || !strings.Contains(d.Error, "certificate") {
		t.Errorf("decision %+v", d)
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens there now
	for _, connect := range []bool{true, false} {
		t.Run(fmt.Sprintf("connect=%v", connect), func(t *testing.T) {
			h := startGateway(t, testConfig(true, port), newResolver(map[string]string{"api.allowed.test": "127.0.0.1"}), true)
			target := fmt.Sprintf("api.allowed.test:%d", port)
			req := fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
			if connect {
				req = fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
			}
			resp, body, _, _ := h.raw(req)
			if resp.StatusCode != 502 || !strings.Contains(body, "refused") {
				t.Errorf("got %d %q, want 502", resp.StatusCode, body)
			}
			d := h.waitDecisions(1)[0]
			if d.Decision != Allow || d.ResolvedIP != "127.0.0.1" || !strings.Contains(d.Error, "refused") {
				t.Errorf("decision %+v", d)
			}
		})
	}
}

// TestSquidLogFormatMatchesSpec keeps the parser's format and the one the
// generated squid.conf declares in step.
func TestSquidLogFormatMatchesSpec(t *testing.T) {
	conf := spec.SquidConf(netpolicy.NewConfig([]string{".allowed.test"}, nil))
	if !strings.Contains(conf, "\nlogformat mcpsidecar "+SquidLogFormat+"\n") {
		t.Errorf("squid.conf does not declare egress.SquidLogFormat:\n%s", conf)
	}
}
