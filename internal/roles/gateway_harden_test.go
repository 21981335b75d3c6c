//go:build linux

package roles

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestGatewayHardening: the gateway hardens through hardenRole like every
// role: degradations are printed, the report lands next to the decision
// log, and a layer the kernel cannot enforce is exit code 5 before anything
// is served. Apply is faked: the real one would lock down the test process.
func TestGatewayHardening(t *testing.T) {
	sp, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := spec.Resolve(sp)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := json.Marshal(prof.Containers[orchestrate.RoleGateway].Harden)
	if err != nil {
		t.Fatal(err)
	}
	const deg = "landlock-net: not fully enforced (kernel Landlock ABI 3); accepted as best effort"
	tests := []struct {
		name     string
		applyErr error
		wantCode int // -1: serves, then stops cleanly
	}{
		{"degraded but enforced", nil, -1},
		{"layer unavailable", &harden.UnavailableError{Layer: "landlock-fs", Reason: "no Landlock"}, exitUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := applyHarden
			t.Cleanup(func() { applyHarden = orig })
			applied := false
			applyHarden = func(harden.Policy) (harden.Report, error) {
				applied = true
				return harden.Report{Schema: harden.ReportSchema, Role: "gateway", Degradations: []string{deg}}, tt.applyErr
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			dir := t.TempDir()
			o := gatewayOptions{listen: addr, decisionLog: filepath.Join(dir, "egress-decisions.jsonl"), maxTunnels: 8,
				idleTimeout: time.Minute, maxDuration: time.Minute, shutdownWait: time.Second}
			getenv := func(k string) string {
				return map[string]string{envGatewayPolicy: testGatewayPolicy, harden.EnvPolicy: string(pol)}[k]
			}
			var errb bytes.Buffer // read only after runGateway returned
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- runGateway(ctx, Streams{Out: &bytes.Buffer{}, Err: &errb}, o, getenv) }()
			if tt.wantCode < 0 {
				waitHealthy(t, addr)
				cancel()
			}
			err = <-done
			if !applied {
				t.Fatal("the gateway did not harden")
			}
			if code, _ := exitcode.Of(err); tt.wantCode < 0 && err != nil || tt.wantCode >= 0 && code != tt.wantCode {
				t.Fatalf("got %v (exit %d), want exit %d", err, code, max(tt.wantCode, 0))
			}
			if want := "mcpsidecar gateway: hardening degraded: " + deg; !strings.Contains(errb.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, errb.String())
			}
			data, err := os.ReadFile(filepath.Join(dir, harden.ReportFile))
			if err != nil {
				t.Fatal(err)
			}
			if rep, err := harden.ParseReport(data); err != nil || rep.Role != "gateway" {
				t.Errorf("report %+v, %v", rep, err)
			}
		})
	}
}
