package hold

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHold(t *testing.T) {
	if err := Wait(context.Background(), "", Timeout); err != nil {
		t.Fatalf("no hold file: %v", err)
	}
	file := filepath.Join(t.TempDir(), ".mcpsidecar-start")
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.WriteFile(file, nil, 0o644)
	}()
	start := time.Now()
	if err := Wait(context.Background(), file, Timeout); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Error("hold returned before the file existed")
	}
	if _, err := os.Lstat(file); err == nil {
		t.Error("the hold file was not removed")
	}

	if err := Wait(context.Background(), filepath.Join(t.TempDir(), "never"), 30*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not released") {
		t.Fatalf("got %v, want a timeout", err)
	}
}

func TestHoldFromEnvUnsets(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".mcpsidecar-start")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, file)
	if err := FromEnv(context.Background(), Timeout); err != nil {
		t.Fatal(err)
	}
	if v, ok := os.LookupEnv(Env); ok {
		t.Errorf("%s is still set (%q): a child would wait for a file that is gone", Env, v)
	}
}

// TestBothEnds: the file the host releases is the one the plan names.
func TestBothEnds(t *testing.T) {
	out := t.TempDir()
	role := "agent"
	if err := os.Mkdir(filepath.Join(out, role), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, Path(filepath.Join(out, role)))
	write := func(name string, data []byte) error { return os.WriteFile(filepath.Join(out, name), data, 0o644) }
	if err := Release(role, write); err != nil {
		t.Fatal(err)
	}
	if err := FromEnv(context.Background(), time.Second); err != nil {
		t.Fatalf("the released file is not the one waited for: %v", err)
	}
}

// TestHoldStops: a role stopped while held (SIGTERM, its context ended)
// returns at once, not at the timeout, and says so.
func TestHoldStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(30 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	err := Wait(ctx, filepath.Join(t.TempDir(), File), Timeout)
	if err == nil || !strings.Contains(err.Error(), "stopped while held") {
		t.Fatalf("got %v, want stopped while held", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %s", d)
	}
}
