//go:build docker

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostGateway is `mcpsidecar gateway` run on the host (no container),
// holding one credential for 127.0.0.1:credPort (plain http) and
// allowing 127.0.0.1 on the given ports.
type hostGateway struct {
	listen, cred, placeholder, dir string
	cmd                            *exec.Cmd
}

func startHostGateway(t *testing.T, bin, key string, credPort int, ports ...int) *hostGateway {
	t.Helper()
	g := &hostGateway{dir: t.TempDir(), listen: redteamFreeAddr(t), cred: redteamFreeAddr(t)}
	var ps []string
	for _, p := range ports {
		ps = append(ps, fmt.Sprint(p))
	}
	policy := fmt.Sprintf(`{"schema":"mcpsidecar.gateway-policy/v1","allowed_domains":[],"allowed_ip_addresses":["127.0.0.1/32"],"http_ports":[%s],"connect_ports":[%s]}`,
		strings.Join(ps, ","), strings.Join(ps, ","))
	if err := os.WriteFile(filepath.Join(g.dir, "policy.json"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	ph := make([]byte, 24)
	rand.Read(ph)
	g.placeholder = "mcpsidecar-placeholder-" + hex.EncodeToString(ph)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g.cmd = exec.CommandContext(ctx, bin, "gateway", "--policy", filepath.Join(g.dir, "policy.json"), "--listen", g.listen,
		"--credential-listen", g.cred, "--decision-log", filepath.Join(g.dir, "egress-decisions.jsonl"))
	g.cmd.Env = append(os.Environ(),
		fmt.Sprintf(`MCPSIDECAR_GATEWAY_CREDENTIALS=[{"host":"127.0.0.1","port":%d,"scheme":"http","header":"Authorization","format":"Bearer {value}","from_env":"HELD_KEY"}]`, credPort),
		"HELD_KEY="+key, "MCPSIDECAR_CREDENTIAL_PLACEHOLDER="+g.placeholder)
	g.cmd.Stderr = os.Stderr
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); g.cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r, err := http.Get("http://" + g.cred + "/healthz"); err == nil {
			r.Body.Close()
			return g
		}
		if time.Now().After(deadline) {
			t.Fatal("credential listener not ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for the gateway to exit by itself.
func (g *hostGateway) stop(t *testing.T) {
	t.Helper()
	g.cmd.Process.Signal(syscall.SIGTERM)
	if err := g.cmd.Wait(); err != nil {
		t.Errorf("gateway exit: %v", err)
	}
}
