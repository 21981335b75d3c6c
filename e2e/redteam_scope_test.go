//go:build docker

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRedteamScopeMappedLiteral: with [[mcp_servers]], the agent must not
// reach a declared server's host:port except through the sidecar
// (docs/egress.md, Scopes). The scope table compares host strings, the
// allowlist compares addresses: the agent names the declared server
// 127.0.0.1:PORT as the IPv4-mapped literal [::ffff:127.0.0.1]:PORT, the
// allowlist admits it (same address), the scope check does not recognise
// it, and the request reaches the server directly.
//
// The gateway runs on the host; nobody is the sidecar there (its alias
// does not resolve), so every client is judged as the agent.
//
// FINDING (fails on the code it was written against): expected 403
// (a declared MCP server's host), got the server's answer.
func TestRedteamScopeMappedLiteral(t *testing.T) {
	bin := os.Getenv("MCPSIDECAR_BIN")
	if bin == "" {
		t.Fatal("MCPSIDECAR_BIN is not set: build the binary (make build) and point MCPSIDECAR_BIN at it; `make e2e` does both")
	}
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "REDTEAM-MCP-SERVER-REACHED\n")
	})}
	go srv.Serve(up)
	t.Cleanup(func() { srv.Close() })
	port := up.Addr().(*net.TCPAddr).Port

	dir := t.TempDir()
	policy := fmt.Sprintf(`{"schema":"mcpsidecar.gateway-policy/v1","allowed_domains":[],"allowed_ip_addresses":["127.0.0.1/32"],"http_ports":[%d],"connect_ports":[%d]}`, port, port)
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := redteamFreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gw := exec.CommandContext(ctx, bin, "gateway", "--policy", filepath.Join(dir, "policy.json"), "--listen", listen,
		"--decision-log", filepath.Join(dir, "decisions.jsonl"))
	gw.Env = append(os.Environ(),
		fmt.Sprintf(`MCPSIDECAR_MCP_SERVERS=[{"name":"srv","url":"http://127.0.0.1:%d/mcp","on_drift":"fail"}]`, port))
	gw.Stderr = os.Stderr
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); gw.Wait() })
	proxy, _ := url.Parse("http://" + listen)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}, Timeout: 10 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r, err := http.Get("http://" + listen + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway not ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	get := func(u string) (int, string) {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Control: the plain spelling is refused.
	if code, body := get(fmt.Sprintf("http://127.0.0.1:%d/mcp", port)); code != http.StatusForbidden || strings.Contains(body, "REDTEAM-MCP-SERVER-REACHED") {
		t.Fatalf("control: the declared server's own host:port was not refused: HTTP %d %s", code, body)
	}
	if code, body := get(fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/mcp", port)); strings.Contains(body, "REDTEAM-MCP-SERVER-REACHED") {
		t.Errorf("the agent reached declared MCP server srv directly as [::ffff:127.0.0.1]:%d (HTTP %d): the scope check compares names, the allowlist addresses", port, code)
	}
}
