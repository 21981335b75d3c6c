//go:build linux

package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// anyResolver answers every name with one address and records lookups.
type anyResolver struct {
	mu      sync.Mutex
	addr    netip.Addr
	lookups []string
}

func (r *anyResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	return []netip.Addr{r.addr}, nil
}

func loadCorpus(t *testing.T) *netpolicy.Corpus {
	t.Helper()
	c, err := netpolicy.LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// corpusGateway serves the corpus's config with r as resolver and dialing
// disabled: an allowed request ends in a recorded dial attempt, never a
// packet.
func corpusGateway(t *testing.T, c *netpolicy.Corpus, r Resolver) *harness {
	t.Helper()
	h := startGateway(t, c.Config, nil, false)
	h.g.resolver = r
	return h
}

func connectTarget(host string) string {
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		return "[" + host + "]:443"
	}
	return host + ":443"
}

// TestCorpusHostsLive replays the netpolicy corpus's request hosts
// through a live gateway: invalid and denied hosts are refused without a
// lookup or a dial; allowed names are looked up (under their normalised
// name) and then refused only for the loopback answer; allowed literals
// are dialed.
func TestCorpusHostsLive(t *testing.T) {
	c := loadCorpus(t)
	for _, tc := range c.Hosts {
		t.Run(tc.Input, func(t *testing.T) {
			res := &anyResolver{addr: netip.MustParseAddr("127.0.0.1")}
			h := corpusGateway(t, c, res)
			resp, body := sendConnect(t, h, connectTarget(tc.Input))
			ds := h.decisions()
			if resp.StatusCode == http.StatusBadRequest && len(ds) == 0 {
				// refused by net/http before the gateway saw it
				if !tc.Invalid && tc.Allowed {
					t.Fatalf("allowed host refused by the HTTP parser: %q", body)
				}
				return
			}
			if len(ds) != 1 {
				t.Fatalf("%d decisions: %+v", len(ds), ds)
			}
			checkCorpusHost(t, tc, ds[0], res.lookups, h.dialed())
		})
	}
}

func sendConnect(t *testing.T, h *harness, target string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, body, _, _ := h.rawOn(c, fmt.Sprintf("CONNECT %s HTTP/1.1\r\n\r\n", target))
	return resp, body
}

func checkCorpusHost(t *testing.T, tc netpolicy.HostCase, d Decision, lookups, dials []string) {
	t.Helper()
	isLiteral := false
	if _, err := netip.ParseAddr(tc.Normalized); err == nil {
		isLiteral = true
	}
	switch {
	case tc.Invalid || !tc.Allowed:
		if d.Decision != Deny || len(lookups) != 0 || len(dials) != 0 {
			t.Errorf("want a refusal without lookup or dial; got %+v, lookups %v, dials %v", d, lookups, dials)
		}
	case isLiteral:
		if d.Decision != Allow || len(lookups) != 0 || len(dials) != 1 || d.Rule != tc.Rule {
			t.Errorf("want the literal dialed under rule %q; got %+v, lookups %v, dials %v", tc.Rule, d, lookups, dials)
		}
	default:
		if len(lookups) != 1 || lookups[0] != tc.Normalized || d.Host != tc.Normalized {
			t.Errorf("want one lookup of %q; got %v (decision host %q)", tc.Normalized, lookups, d.Host)
		}
		if d.Decision != Deny || !strings.Contains(d.Reason, "loopback") || len(dials) != 0 {
			t.Errorf("want the loopback answer refused; got %+v, dials %v", d, dials)
		}
	}
}

// TestCorpusAddressesLive resolves an allowed name to each corpus address.
// An IPv4-mapped answer is judged by its IPv4 form, which is the address
// dialed (Go's resolver returns A records in mapped form).
func TestCorpusAddressesLive(t *testing.T) {
	c := loadCorpus(t)
	p, err := netpolicy.Compile(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range c.Addresses {
		t.Run(tc.Addr, func(t *testing.T) {
			a := netip.MustParseAddr(tc.Addr)
			allowed := tc.Allowed
			if a.Is4In6() {
				_, _, allowed = p.CheckAddr(a.Unmap())
			}
			res := &anyResolver{addr: a}
			h := corpusGateway(t, c, res)
			sendConnect(t, h, "api.allowed.test:443")
			d := h.waitDecisions(1)[0]
			dials := h.dialed()
			if allowed {
				want := netip.AddrPortFrom(a.Unmap(), 443).String()
				if d.Decision != Allow || len(dials) != 1 || dials[0] != want {
					t.Errorf("want a dial of %s; got %+v, dials %v", want, d, dials)
				}
				return
			}
			if d.Decision != Deny || len(dials) != 0 {
				t.Errorf("want a refusal; got %+v, dials %v", d, dials)
			}
			if !a.Is4In6() && !strings.Contains(d.Reason, tc.Class) {
				t.Errorf("reason %q does not name class %s", d.Reason, tc.Class)
			}
		})
	}
}
