//go:build linux

package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/mcpfake"
)

type loopResolver map[string]string

func (r loopResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCredentialRoute: a server that requires a bearer token is reached
// through a real gateway's credential listener: the sidecar holds only
// the placeholder, the gateway swaps in the token for that server's host
// alone, and the decision line names the sidecar's scope.
func TestCredentialRoute(t *testing.T) {
	const token, placeholder = "real-token-5f3a9c", "mcpsidecar-placeholder-0123456789abcdef"
	fakeA, urlA := startMCPFake(t, mcpfake.Options{Name: "a", Tools: docsTools("S."), BearerToken: token})
	portA := netip.MustParseAddrPort(strings.TrimSuffix(strings.TrimPrefix(urlA, "http://"), "/mcp")).Port()
	hostA := fmt.Sprintf("mcp-a.test:%d", portA)
	pol, err := netpolicy.Compile(netpolicy.NewConfig([]string{hostA}, []string{"127.0.0.1/32"}))
	if err != nil {
		t.Fatal(err)
	}
	scopes, err := egress.NewScoper(egress.ScopeConfig{SidecarHost: "mcp-sidecar", Servers: []egress.ScopeServer{{Name: "a", Hosts: []string{hostA}}}},
		func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	decisions := &lockedBuffer{}
	g, err := egress.New(egress.Options{Policy: pol, Log: egress.NewDecisionLog(decisions), Resolver: loopResolver{"mcp-a.test": "127.0.0.1"},
		RunID: "t", Scopes: scopes, Injection: &egress.Injection{Placeholder: placeholder, Credentials: []egress.Credential{
			{Host: "mcp-a.test", Port: portA, Scheme: "http", Header: "Authorization", Format: "Bearer {value}", Value: token, Source: "MCP_A_TOKEN"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.ServeCredentials(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	})
	ts := startSidecar(t, Config{Servers: []ServerConfig{{Name: "a", URL: "http://" + hostA + "/mcp", Tools: []string{"search"},
		Credential: &CredentialRoute{Listener: "http://" + ln.Addr().String(), Header: "Authorization", Value: "Bearer " + placeholder}}}})
	cs := connect(t, ts.URL, "")
	text, isErr := callText(t, cs, "search", map[string]any{"query": "q"})
	if isErr || text != `a/search {"query":"q"}` {
		t.Fatalf("search = %q (isError %v)", text, isErr)
	}
	calls := fakeA.Calls()
	if len(calls) != 1 || calls[0].Header.Get("Authorization") != "Bearer "+token {
		t.Fatalf("server a calls %+v, want one with the real token", calls)
	}
	if calls[0].Header.Get(egress.HeaderScope) != "" {
		t.Error("the scope header reached the server")
	}
	// The gateway writes a request's line when the exchange ends, which
	// can be just after the sidecar has its answer: wait for it.
	log := decisions.String()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(log, `"scope":"sidecar/a/search"`); {
		time.Sleep(10 * time.Millisecond)
		log = decisions.String()
	}
	if !strings.Contains(log, `"scope":"sidecar/a/search"`) || !strings.Contains(log, `"credential":"injected"`) {
		t.Errorf("decision log lacks the sidecar's scope or the injection:\n%s", log)
	}
	if strings.Contains(log, token) {
		t.Error("the token is in the decision log")
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	if audit, _ := os.ReadFile(ts.AuditPath); bytes.Contains(audit, []byte(token)) || !bytes.Contains(audit, []byte(`"server":"a"`)) {
		t.Errorf("audit log: token present or server missing:\n%s", audit)
	}
}
