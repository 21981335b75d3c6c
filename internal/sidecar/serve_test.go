//go:build linux

package sidecar

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// serveWithOrder runs Serve with its seams recording into a StartOrder;
// the harden hook records "harden" and returns hardenErr.
func serveWithOrder(t *testing.T, hardenErr error) (order *testutil.StartOrder, audit string, cancel func(), done <-chan error) {
	t.Helper()
	order = &testutil.StartOrder{}
	origListen, origRoots := listen, preloadTLSRoots
	t.Cleanup(func() { listen, preloadTLSRoots = origListen, origRoots })
	listen = order.Listen
	preloadTLSRoots = func() { order.Add("tls-roots") }
	audit = filepath.Join(t.TempDir(), AuditFileName)
	cfg := ServeConfig{Config: Config{NoUpstream: true, Logger: slog.New(slog.DiscardHandler)}, Addr: "127.0.0.1:0", AuditLog: audit}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, cfg, func() error {
			if _, err := os.Stat(audit); err == nil {
				order.Add("audit-open")
			}
			order.Add("harden")
			return hardenErr
		})
	}()
	return order, audit, cancel, errc
}

// TestServeHardensBeforeServing: the audit log is open, the listener bound
// and the TLS roots loaded before harden; the first accept comes after it.
func TestServeHardensBeforeServing(t *testing.T) {
	order, _, cancel, done := serveWithOrder(t, nil)
	order.WaitFor(t, "accept")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	want := []string{"listen", "tls-roots", "audit-open", "harden", "accept", "close"}
	if diff := cmp.Diff(want, order.Events()); diff != "" {
		t.Errorf("start order mismatch (-want +got):\n%s", diff)
	}
}

// TestServeHardenFailureServesNothing: a harden error is returned as it
// is, the listener is closed without one accept, and the audit log closed.
func TestServeHardenFailureServesNothing(t *testing.T) {
	errHarden := errors.New("landlock unavailable")
	order, _, _, done := serveWithOrder(t, errHarden)
	if err := <-done; !errors.Is(err, errHarden) {
		t.Fatalf("Serve returned %v, want the harden error", err)
	}
	want := []string{"listen", "tls-roots", "audit-open", "harden", "close"}
	if diff := cmp.Diff(want, order.Events()); diff != "" {
		t.Errorf("start order mismatch (-want +got):\n%s", diff)
	}
}

func TestServeNeedsHardenHook(t *testing.T) {
	if err := Serve(context.Background(), ServeConfig{Addr: "127.0.0.1:0"}, nil); err == nil {
		t.Fatal("Serve without a harden hook returned nil")
	}
}
