package orchestrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// TestReadinessWithoutProof: when the engine's pid is not proven to be the
// container's process on this host (an engine elsewhere, or a proof that
// failed), the session connects to nothing and reads nothing: readiness
// is the engine's report that the container runs, recorded with the
// reason.
func TestReadinessWithoutProof(t *testing.T) {
	for _, tt := range []struct {
		name   string
		setup  func(f *fakeEngine)
		reason string
	}{
		{"engine not local", func(f *fakeEngine) {
			f.NotLocal = "the engine's API is tcp://10.0.0.5:2375, not a unix socket on this host"
		}, "tcp://10.0.0.5:2375"},
		{"proof failed", func(f *fakeEngine) {
			f.ProcessErr = func(string) error {
				return fmt.Errorf("%w (process 4242 is a kernel thread)", dockerx.ErrNotOnThisHost)
			}
		}, "kernel thread"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			tt.setup(f)
			f.Listening = func(int, int) (bool, error) {
				t.Error("a listening socket was read")
				return false, nil
			}
			s := newTestSession(f, testPlan(healthServer(t, http.StatusServiceUnavailable)))
			ctx := context.Background()
			if err := s.CreateNetworks(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.StartService(ctx, RoleGateway, 2*time.Second); err != nil {
				t.Fatalf("StartService: %v", err)
			}
			c := s.Find(RoleGateway)
			if len(f.Dials) != 0 || len(f.Proven) != 0 || c.Process != nil {
				t.Errorf("dials %q, proven %q, process %v: want none", f.Dials, f.Proven, c.Process)
			}
			if !strings.HasPrefix(c.ReadyBy, ReadyByEngine) || !strings.Contains(c.ReadyBy, tt.reason) ||
				!strings.Contains(c.ReadyBy, "the engine's process is not on this host") {
				t.Errorf("ReadyBy = %q, want %q with the reason", c.ReadyBy, ReadyByEngine)
			}
		})
	}
}

// TestReadinessProcessGone: a process that ended before it could be
// proven is a container that exited before it was ready.
func TestReadinessProcessGone(t *testing.T) {
	f := newFake()
	f.ProcessErr = func(id string) error {
		f.Exit(id, 3)
		return fmt.Errorf("process 4242: %w", dockerx.ErrProcessGone)
	}
	s := newTestSession(f, testPlan(healthServer(t, http.StatusOK)))
	ctx := context.Background()
	if err := s.CreateNetworks(ctx); err != nil {
		t.Fatal(err)
	}
	err := s.StartService(ctx, RoleGateway, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited with code 3 before it was ready") {
		t.Errorf("StartService = %v, want the exit before ready", err)
	}
}

// TestHeldWithoutProof: a held container whose init is not proven is
// handed to Prepare with the reason and no process; the exit watch does
// not run on it.
func TestHeldWithoutProof(t *testing.T) {
	f := newFake()
	f.NotLocal = "the daemon behind /var/run/docker.sock runs in another pid namespace than this host's"
	f.WatchExit = func(int, string, <-chan struct{}) <-chan struct{} {
		t.Error("a process not proven was watched")
		return nil
	}
	plan := testPlan(0)
	plan.Containers[1].Hold = true
	s := newTestSession(f, plan)
	var got error
	s.Prepare = func(_ context.Context, c *Container) error {
		if c.Process != nil {
			t.Error("Prepare got a process")
		}
		got = c.ProcessErr
		return nil
	}
	s.Release = func(Step) error { return nil }
	ctx := context.Background()
	w, err := s.StartWorkload(ctx, RoleAgent, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(got, dockerx.ErrNotOnThisHost) || !strings.Contains(got.Error(), "another pid namespace") {
		t.Errorf("Prepare's reason = %v, want ErrNotOnThisHost with the engine's", got)
	}
	go f.Exit(w.c.ID, 0)
	if _, err := s.awaitExit(ctx, w.c, w.done, 5*time.Second, func(context.Context) {}); err != nil {
		t.Fatal(err)
	}
}
