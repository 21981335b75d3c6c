//go:build linux

package roles

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

const testGatewayPolicy = `{"schema":"mcpsidecar.gateway-policy/v1","allowed_domains":[".allowed.test"],"allowed_ip_addresses":[],"http_ports":[80,443],"connect_ports":[443]}`

func TestLoadGatewayPolicyErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, file, env, want string
	}{
		{"none", "", "", "no gateway policy"},
		{"missing file", filepath.Join(dir, "nope.json"), "", "reading gateway policy"},
		{"bad json", write("bad.json", "{"), "", "bad.json"},
		{"unknown field", write("unknown.json", `{"allowed_domain":[".a.test"]}`), "", "unknown field"},
		{"bad rule", write("rule.json", `{"allowed_domains":["*"]}`), "", "allowed_domains[0]"},
		{"bad env", "", `{"allowed_ip_addresses":["0.0.0.0/0"]}`, "$MCPSIDECAR_GATEWAY_POLICY"},
		{"bad schema", "", `{"schema":"other/v9"}`, "schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadGatewayPolicy(tc.file, func(k string) string {
				if k == envGatewayPolicy {
					return tc.env
				}
				return ""
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
			if code, _ := exitcode.Of(err); code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
		})
	}
}

func TestGatewayUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"gateway", "--max-tunnels", "0"},
		{"gateway", "--idle-timeout", "0s"},
		{"gateway", "--listen", ""},
		{"gateway", "extra"},
	} {
		code, _, stderr := run(t, args...)
		if code != exitUsage {
			t.Errorf("%v: code %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
	}
}

// TestGatewayCommand runs the command: readiness answers, a denied
// CONNECT is logged, and cancelling (SIGTERM) shuts it down cleanly.
func TestGatewayCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "egress-decisions.jsonl")
	o := gatewayOptions{listen: addr, decisionLog: logPath, runID: "run-x", maxTunnels: 8,
		idleTimeout: time.Minute, maxDuration: time.Minute, shutdownWait: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == envGatewayPolicy {
			return testGatewayPolicy
		}
		return ""
	}
	go func() { done <- runGateway(ctx, Streams{Out: io.Discard, Err: io.Discard}, o, getenv) }()
	waitHealthy(t, addr)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	if !strings.Contains(string(b), "403") || !strings.Contains(string(b), "not in allowed_domains") {
		t.Errorf("response %q", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("gateway returned %v", err)
	}
	log, _ := os.ReadFile(logPath)
	if !strings.Contains(string(log), `"run_id":"run-x"`) || !strings.Contains(string(log), `"decision":"deny"`) {
		t.Errorf("decision log %q", log)
	}
}

func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("gateway never became healthy")
}
