package agent

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	route4Header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	route4Net    = "eth0\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
	route4Def    = "eth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	route6Reject = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000001 00200200 lo\n"
	route6Def    = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n"
	route6Local  = "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth0\n"
)

func TestCheckNoRoute(t *testing.T) {
	tests := []struct {
		name     string
		v4, v6   string // "-" = file missing
		engine   string
		wantOK   bool
		inDetail string
	}{
		{"internal network", route4Header + route4Net, route6Local + route6Reject, "", true, "no default route"},
		{"IPv6 disabled", route4Header + route4Net, "-", "27.3.1", true, "no default route"},
		{"IPv4 default", route4Header + route4Net + route4Def, route6Reject, "", false, "default route via eth0 gateway 172.18.0.1"},
		{"IPv4 default, new engine", route4Header + route4Net + route4Def, route6Reject, "27.3.1", false, "default route via eth0"},
		{"IPv4 default, engine before 25", route4Header + route4Net + route4Def, route6Reject, "20.10.24+dfsg1", true, "Docker Engine 20.10.24+dfsg1 (< 25)"},
		{"IPv4 default, garbled engine", route4Header + route4Net + route4Def, route6Reject, "twenty", false, "default route via eth0"},
		{"IPv6 default", route4Header, route6Def, "", false, "default route via eth0"},
		{"garbled v4", route4Header + "eth0 zz\n", "", "", false, "fields"},
		{"garbled v6 flags", route4Header, strings.Replace(route6Def, "00000003", "zz", 1), "", false, "flags"},
		{"no v4 table", "-", "", "", false, "reading routes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			v4, v6 := filepath.Join(dir, "route"), filepath.Join(dir, "ipv6_route")
			for path, body := range map[string]string{v4: tt.v4, v6: tt.v6} {
				if body != "-" {
					os.WriteFile(path, []byte(body), 0o644)
				}
			}
			c := checkNoRoute(v4, v6, tt.engine)
			if c.OK != tt.wantOK || !strings.Contains(c.Detail, tt.inDetail) {
				t.Errorf("checkNoRoute = %+v, want ok=%v with %q", c, tt.wantOK, tt.inDetail)
			}
		})
	}
}

// fakeGateway answers every proxied request with status and body, and
// records the request line it saw.
func fakeGateway(t *testing.T, status int, body string) (*httptest.Server, *[]string) {
	t.Helper()
	var seen []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.String()+" traceparent="+r.Header.Get("Traceparent"))
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s, &seen
}

func TestCheckGatewayRefuses(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		noProxy  bool
		wantOK   bool
		inDetail string
	}{
		{"refused with reason", 403, "denied: probe.invalid is not in allowed_domains\n", false, true, "403: denied"},
		{"allowed", 200, "hello", false, false, "answered 200"},
		{"refused without reason", 403, "", false, false, "answered 403"},
		{"no proxy configured", 0, "", true, false, "nothing sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw, seen := fakeGateway(t, tt.status, tt.body)
			env := map[string]string{"HTTP_PROXY": gw.URL}
			if tt.noProxy {
				env = nil
			}
			cfg := Config{Proxy: proxyFromEnv(func(k string) string { return env[k] }), RequestTimeout: 5 * time.Second}
			c := checkGatewayRefuses(context.Background(), cfg)
			if c.OK != tt.wantOK || !strings.Contains(c.Detail, tt.inDetail) {
				t.Errorf("check = %+v, want ok=%v with %q", c, tt.wantOK, tt.inDetail)
			}
			if tt.noProxy {
				if len(*seen) != 0 {
					t.Errorf("sent %v without a proxy", *seen)
				}
				return
			}
			if len(*seen) != 1 || !strings.HasPrefix((*seen)[0], "GET "+ProbeURL+" traceparent=00-") {
				t.Errorf("gateway saw %v, want one absolute-form GET %s with a traceparent", *seen, ProbeURL)
			}
		})
	}
}

func TestRunConnectivityCheck(t *testing.T) {
	_, sideURL := startSidecar(t)
	gw, _ := fakeGateway(t, 403, "denied: not allowed")
	dir := t.TempDir()
	route4, route6 = filepath.Join(dir, "route"), filepath.Join(dir, "ipv6_route")
	t.Cleanup(func() { route4, route6 = "/proc/net/route", "/proc/net/ipv6_route" })
	os.WriteFile(route4, []byte(route4Header+route4Net), 0o644)
	os.WriteFile(route6, []byte(route6Reject), 0o644)
	env := map[string]string{EnvSidecarURL: sideURL, "HTTP_PROXY": gw.URL, "NO_PROXY": "127.0.0.1"}
	cfg, err := LoadConfig(Options{OutputDir: dir}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RunConnectivityCheck(context.Background(), cfg, &out); err != nil {
		t.Fatalf("RunConnectivityCheck: %v\n%s", err, out.String())
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		rows = append(rows, strings.Join(strings.Fields(line)[:2], " "))
	}
	// Names have spaces; compare the first two words of each row.
	wantRows := []string{"sidecar tools", "answer format", "gateway refuses", "gateway refuses", "no route"}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s\n%s", diff, out.String())
	}
	if strings.Contains(out.String(), "FAIL") {
		t.Errorf("a check failed:\n%s", out.String())
	}

	// The same check with a gateway that lets the probe through must fail.
	open, _ := fakeGateway(t, 200, "ok")
	env["HTTP_PROXY"] = open.URL
	cfg, _ = LoadConfig(Options{OutputDir: dir}, func(k string) string { return env[k] })
	out.Reset()
	err = RunConnectivityCheck(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "gateway refuses .invalid") {
		t.Errorf("error = %v, want the gateway check named", err)
	}
}
