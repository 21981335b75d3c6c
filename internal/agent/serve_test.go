package agent

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// serveWithOrder runs Serve against a loopback server standing for the
// sidecar and the model, which records "request" on every request; the
// harden hook records "harden" and returns hardenErr.
func serveWithOrder(t *testing.T, apiKey string, hardenErr error) (*testutil.StartOrder, error) {
	t.Helper()
	order := &testutil.StartOrder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		order.Add("request")
		http.Error(w, "test server", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	cfg := ServeConfig{Config: Config{SidecarURL: srv.URL + "/mcp", BaseURL: srv.URL + "/v1", APIKey: apiKey, Model: "m",
		Question: "q", OutputDir: t.TempDir(), MaxTurns: 1, RequestTimeout: 5 * time.Second, RetryBase: time.Millisecond,
		MaxAnswerBytes: 1024}, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	err := Serve(context.Background(), cfg, func() error {
		order.Add("harden")
		return hardenErr
	})
	return order, err
}

// TestServeHardensBeforeConnecting: the first request the agent makes
// comes after harden.
func TestServeHardensBeforeConnecting(t *testing.T) {
	order, err := serveWithOrder(t, "sk-test", nil)
	if err == nil {
		t.Fatal("Serve against a failing sidecar returned nil")
	}
	if diff := cmp.Diff([]string{"harden", "request"}, order.Events()); diff != "" {
		t.Errorf("start order mismatch (-want +got):\n%s", diff)
	}
}

// TestServeHardenFailureContactsNothing: a harden error is returned as it
// is and no request is made; without a key, nothing is contacted either.
func TestServeHardenFailureContactsNothing(t *testing.T) {
	errHarden := errors.New("landlock unavailable")
	order, err := serveWithOrder(t, "sk-test", errHarden)
	if !errors.Is(err, errHarden) {
		t.Fatalf("Serve returned %v, want the harden error", err)
	}
	if diff := cmp.Diff([]string{"harden"}, order.Events()); diff != "" {
		t.Errorf("steps mismatch (-want +got):\n%s", diff)
	}
	order, err = serveWithOrder(t, "", nil)
	if !errors.Is(err, ErrMissingKey) {
		t.Fatalf("Serve without a key returned %v, want ErrMissingKey", err)
	}
	if diff := cmp.Diff([]string{"harden"}, order.Events()); diff != "" {
		t.Errorf("steps mismatch (-want +got):\n%s", diff)
	}
}

func TestServeNeedsHardenHook(t *testing.T) {
	if err := Serve(context.Background(), ServeConfig{}, nil); err == nil {
		t.Fatal("Serve without a harden hook returned nil")
	}
}
