package hold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHold(t *testing.T) {
	if err := Wait("", Timeout); err != nil {
		t.Fatalf("no hold file: %v", err)
	}
	file := filepath.Join(t.TempDir(), ".mcpsidecar-start")
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.WriteFile(file, nil, 0o644)
	}()
	start := time.Now()
	if err := Wait(file, Timeout); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Error("hold returned before the file existed")
	}
	if _, err := os.Lstat(file); err == nil {
		t.Error("the hold file was not removed")
	}

	if err := Wait(filepath.Join(t.TempDir(), "never"), 30*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not released") {
		t.Fatalf("got %v, want a timeout", err)
	}
}

func TestHoldFromEnvUnsets(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".mcpsidecar-start")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, file)
	if err := FromEnv(Timeout); err != nil {
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
	if err := FromEnv(time.Second); err != nil {
		t.Fatalf("the released file is not the one waited for: %v", err)
	}
}
