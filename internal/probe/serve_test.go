//go:build linux

package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// serveWithOrder runs Serve with an empty catalogue; the snapshot records
// "snapshot", the harden hook "harden" (and "suite-started" when the
// suite's status file already exists), and returns hardenErr.
func serveWithOrder(t *testing.T, hardenErr error) (*testutil.StartOrder, string, error) {
	t.Helper()
	order := &testutil.StartOrder{}
	orig := takeSnapshot
	t.Cleanup(func() { takeSnapshot = orig })
	takeSnapshot = func() *Snapshot { order.Add("snapshot"); return &Snapshot{Files: map[string]string{}} }
	out := t.TempDir()
	status := filepath.Join(out, "status.ndjson")
	_, err := Serve(context.Background(), DefaultContext(), Options{OutDir: out, Groups: []GroupInfo{}, Probes: []Probe{}}, func() error {
		if _, err := os.Stat(status); err == nil {
			order.Add("suite-started")
		}
		order.Add("harden")
		return hardenErr
	})
	if _, serr := os.Stat(status); serr == nil {
		order.Add("suite-ran")
	}
	return order, out, err
}

// TestServeHardensBeforeProbing: the limits are read before harden, and
// the suite starts after it.
func TestServeHardensBeforeProbing(t *testing.T) {
	order, _, err := serveWithOrder(t, nil)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if diff := cmp.Diff([]string{"snapshot", "harden", "suite-ran"}, order.Events()); diff != "" {
		t.Errorf("start order mismatch (-want +got):\n%s", diff)
	}
}

// TestServeHardenFailureProbesNothing: a harden error is returned as it
// is and the suite never starts.
func TestServeHardenFailureProbesNothing(t *testing.T) {
	errHarden := errors.New("landlock unavailable")
	order, _, err := serveWithOrder(t, errHarden)
	if !errors.Is(err, errHarden) || err.Error() != errHarden.Error() {
		t.Fatalf("Serve returned %v, want the harden error as it is", err)
	}
	if diff := cmp.Diff([]string{"snapshot", "harden"}, order.Events()); diff != "" {
		t.Errorf("steps mismatch (-want +got):\n%s", diff)
	}
}
