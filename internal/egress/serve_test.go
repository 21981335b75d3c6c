//go:build linux

package egress

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// serveWithOrder runs Serve, with a credential listener, with listen
// recording into a StartOrder; the harden hook records "log-open" when
// the decision log exists, "both-listening" when both ports are bound,
// then "harden", and returns hardenErr.
func serveWithOrder(t *testing.T, hardenErr error) (order *testutil.StartOrder, cancel func(), done <-chan error) {
	t.Helper()
	order = &testutil.StartOrder{}
	orig := listen
	t.Cleanup(func() { listen = orig })
	listen = order.Listen
	p, err := netpolicy.Compile(testConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	cfg := ServeConfig{Listen: "127.0.0.1:0", CredentialListen: "127.0.0.1:0", DecisionLog: dlog, Out: io.Discard,
		Policy: p, Injection: &Injection{Placeholder: "placeholder-0123456789"}, ShutdownWait: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, cfg, func() error {
			if _, err := os.Stat(dlog); err == nil {
				order.Add("log-open")
			}
			if order.Count("listen") == 2 {
				order.Add("both-listening")
			}
			order.Add("harden")
			return hardenErr
		})
	}()
	return order, cancel, errc
}

// TestServeHardensBeforeServing: the decision log is open and both ports
// are bound before harden; the first accept comes after it.
func TestServeHardensBeforeServing(t *testing.T) {
	order, cancel, done := serveWithOrder(t, nil)
	order.WaitFor(t, "accept")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	got := order.Events()
	want := []string{"listen", "log-open", "both-listening", "harden", "accept"}
	if len(got) < len(want) {
		t.Fatalf("steps %v, want them to begin with %v", got, want)
	}
	if diff := cmp.Diff(want, got[:len(want)]); diff != "" {
		t.Errorf("start order mismatch (-want +got):\n%s", diff)
	}
}

// TestServeHardenFailureServesNothing: a harden error is returned as it
// is, and both listeners are closed without one accept.
func TestServeHardenFailureServesNothing(t *testing.T) {
	errHarden := errors.New("landlock unavailable")
	order, _, done := serveWithOrder(t, errHarden)
	if err := <-done; !errors.Is(err, errHarden) {
		t.Fatalf("Serve returned %v, want the harden error", err)
	}
	want := []string{"listen", "log-open", "both-listening", "harden", "close"}
	if diff := cmp.Diff(want, order.Events()); diff != "" {
		t.Errorf("start order mismatch (-want +got):\n%s", diff)
	}
	if n := order.Count("close"); n != 2 {
		t.Errorf("%d listeners closed, want 2", n)
	}
}

func TestServeNeedsHardenHook(t *testing.T) {
	if err := Serve(context.Background(), ServeConfig{Listen: "127.0.0.1:0"}, nil); err == nil {
		t.Fatal("Serve without a harden hook returned nil")
	}
}
