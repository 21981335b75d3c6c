package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/enginever"
)

// ProbeURL is what the connectivity check asks the gateway for. The
// .invalid name is reserved (RFC 2606): the gateway must refuse it before
// any lookup, and it can never reach anything even if it did not.
const ProbeURL = "http://probe.invalid/"

// Check is one row of the connectivity check (also the host verdict's row).
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Route tables read by the no-route check; variables for tests.
var (
	route4 = "/proc/net/route"
	route6 = "/proc/net/ipv6_route"
)

// RunConnectivityCheck is `mcpsidecar agent --check`, the workload doctor
// runs instead of a model: it lists the sidecar's tools, reads the answer
// format, asks the gateway for a .invalid name (expecting a refusal), sends
// a model request to the credential listener without the run's placeholder
// and with a wrong one (expecting both refused), and reads the routing
// tables (expecting no default route). It sends nothing
// outside the sandbox's own networks. It prints a table to w and returns
// an error naming the failed checks.
func RunConnectivityCheck(ctx context.Context, cfg Config, w io.Writer) error {
	checks := []Check{}
	session, err := connectSidecar(ctx, cfg)
	if err != nil {
		checks = append(checks, Check{Name: "sidecar tools", Detail: err.Error()}, Check{Name: "answer format", Detail: "no sidecar session"})
	} else {
		checks = append(checks, checkTools(ctx, session, cfg), checkFormat(ctx, session, cfg))
		session.Close()
	}
	checks = append(checks, checkGatewayRefuses(ctx, cfg), checkPlaceholderRequired(ctx, cfg),
		checkNoRoute(route4, route6, cfg.EngineVersion))
	if err := printChecks(w, checks); err != nil {
		return err
	}
	return failed(checks)
}

// checkTools lists the sidecar's tools; the task needs the code-sample search.
func checkTools(ctx context.Context, s *mcp.ClientSession, cfg Config) Check {
	c := Check{Name: "sidecar tools"}
	ctx, cancel := context.WithTimeout(withTrace(ctx, newTraceID()), cfg.RequestTimeout)
	defer cancel()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		c.Detail = "listing tools: " + err.Error()
		return c
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
		c.OK = c.OK || t.Name == ToolCodeSampleSearch
	}
	c.Detail = fmt.Sprintf("%d tools: %s", len(names), strings.Join(names, ", "))
	if !c.OK {
		c.Detail += " (missing " + ToolCodeSampleSearch + ")"
	}
	return c
}

// checkFormat reads the answer-format resource.
func checkFormat(ctx context.Context, s *mcp.ClientSession, cfg Config) Check {
	c := Check{Name: "answer format"}
	ctx, cancel := context.WithTimeout(withTrace(ctx, newTraceID()), cfg.RequestTimeout)
	defer cancel()
	res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: AnswerFormatURI})
	if err != nil {
		c.Detail = "reading " + AnswerFormatURI + ": " + err.Error()
		return c
	}
	n := len(resourceText(res))
	c.OK = n > 0
	c.Detail = fmt.Sprintf("%s: %d bytes", AnswerFormatURI, n)
	return c
}

// checkGatewayRefuses asks the configured HTTP proxy for [ProbeURL] and
// expects 403 with a reason. Without a proxy it sends nothing: a direct
// request would be a DNS query leaving the sandbox's control.
func checkGatewayRefuses(ctx context.Context, cfg Config) Check {
	c := Check{Name: "gateway refuses .invalid"}
	target, _ := url.Parse(ProbeURL)
	proxy, err := cfg.Proxy(target)
	if err != nil || proxy == nil {
		c.Detail = fmt.Sprintf("no HTTP_PROXY for %s (err %v): nothing sent", ProbeURL, err)
		return c
	}
	resp, err := probeViaProxy(ctx, proxy, cfg.RequestTimeout)
	if err != nil {
		c.Detail = "asking " + proxy.Host + ": " + err.Error()
		return c
	}
	reason := firstLine(strings.TrimSpace(resp.reason))
	c.OK = resp.status == http.StatusForbidden && reason != ""
	c.Detail = fmt.Sprintf("%s answered %d: %s", proxy.Host, resp.status, reason)
	return c
}

type probeResponse struct {
	status int
	reason string
}

// probeViaProxy sends GET ProbeURL through proxy only (never direct).
func probeViaProxy(ctx context.Context, proxy *url.URL, timeout time.Duration) (probeResponse, error) {
	tr := &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}
	client := &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	id := newTraceID()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ProbeURL, nil)
	if err != nil {
		return probeResponse{}, err
	}
	req.Header.Set("traceparent", traceparent(id))
	resp, err := client.Do(req)
	if err != nil {
		return probeResponse{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	reason := firstOf(resp.Header.Get("X-Mcpsidecar-Reason"), string(body))
	return probeResponse{status: resp.StatusCode, reason: reason}, nil
}

// checkNoRoute reads the IPv4 and IPv6 routing tables: an agent container
// on the internal network must have no default route. Reading them sends
// no packet. Docker Engines before 25 give --internal networks a gateway
// (moby PR 46603 removed it), so there a default route to the bridge is
// expected and the host's isolation rules drop what it would forward; with
// engine (the harness's MCPSIDECAR_ENGINE_VERSION) older than 25 the check
// accepts that route and says so. It cannot verify the drop from inside
// without sending a packet towards the world, which it never does.
func checkNoRoute(v4, v6, engine string) Check {
	c := Check{Name: "no route out"}
	var found []string
	for _, f := range []struct {
		path  string
		parse func(io.Reader) ([]string, error)
	}{{v4, defaultRoutes4}, {v6, defaultRoutes6}} {
		routes, err := readRoutes(f.path, f.parse)
		if err != nil {
			c.Detail = err.Error()
			return c
		}
		found = append(found, routes...)
	}
	switch {
	case len(found) == 0:
		c.OK, c.Detail = true, "no default route (IPv4, IPv6)"
	case enginever.Before(engine, enginever.RouteFixed):
		c.OK = true
		c.Detail = fmt.Sprintf("default route via %s: Docker Engine %s (< %d) gives --internal networks a gateway; the host's isolation rules drop what it forwards (not verifiable from inside)",
			strings.Join(found, ", "), engine, enginever.RouteFixed)
	case engine == "":
		c.Detail = "default route via " + strings.Join(found, ", ") + " (engine version unknown: the harness sets " + EnvEngineVersion + "; engines before 25 route --internal networks to the bridge)"
	default:
		c.Detail = "default route via " + strings.Join(found, ", ")
	}
	return c
}

func readRoutes(path string, parse func(io.Reader) ([]string, error)) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(path, "ipv6_route") {
		return nil, nil // IPv6 disabled in the container: no IPv6 route at all
	}
	if err != nil {
		return nil, fmt.Errorf("reading routes: %w", err)
	}
	defer f.Close()
	routes, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return routes, nil
}

// Route flags from linux/route.h.
const (
	rtfUp     = 0x0001
	rtfReject = 0x0200
)

// defaultRoutes4 returns the interfaces of usable IPv4 default routes in a
// /proc/net/route table (destination and mask 0, route up).
func defaultRoutes4(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for n := 0; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 0 || len(f) == 0 {
			continue // header
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 8", n+1, len(f))
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: flags %q: %w", n+1, f[3], err)
		}
		if f[1] == "00000000" && f[7] == "00000000" && flags&rtfUp != 0 && flags&rtfReject == 0 {
			out = append(out, f[0]+" gateway "+hexIPv4(f[2]))
		}
	}
	return out, sc.Err()
}

// hexIPv4 turns a /proc/net/route address (little-endian hex) into
// dotted form, or returns it unchanged.
func hexIPv4(h string) string {
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil || len(h) != 8 {
		return h
	}
	return fmt.Sprintf("%d.%d.%d.%d", byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// defaultRoutes6 does the same for /proc/net/ipv6_route (::/0, up, not the
// kernel's reject entry on lo).
func defaultRoutes6(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 10 {
			return nil, fmt.Errorf("line %d: %d fields, want 10", n, len(f))
		}
		flags, err := strconv.ParseUint(f[8], 16, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: flags %q: %w", n, f[8], err)
		}
		if f[0] == strings.Repeat("0", 32) && f[1] == "00" && flags&rtfUp != 0 && flags&rtfReject == 0 {
			out = append(out, f[9])
		}
	}
	return out, sc.Err()
}

// printChecks writes the table.
func printChecks(w io.Writer, checks []Check) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
	for _, c := range checks {
		res := "ok"
		if !c.OK {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, res, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing checks: %w", err)
	}
	return nil
}

// failed names the failed checks, or returns nil.
func failed(checks []Check) error {
	var names []string
	for _, c := range checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("connectivity check failed: %s", strings.Join(names, ", "))
}
