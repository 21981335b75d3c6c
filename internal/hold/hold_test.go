package hold

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const token = "t0k3n"

func TestHold(t *testing.T) {
	if err := Wait(context.Background(), "", "", Timeout); err != nil {
		t.Fatalf("no hold file: %v", err)
	}
	file := filepath.Join(t.TempDir(), File)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.WriteFile(file, []byte(token), 0o644)
	}()
	start := time.Now()
	if err := Wait(context.Background(), file, token, Timeout); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Error("hold returned before the file existed")
	}
	if _, err := os.Lstat(file); err == nil {
		t.Error("the hold file was not removed")
	}
	if err := Wait(context.Background(), filepath.Join(t.TempDir(), "never"), token, 30*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not released") {
		t.Fatalf("got %v, want a timeout", err)
	}
}

// TestHoldRefusesAFileItDidNotGet: a release file the harness did not
// write (another token, none, a link, a FIFO) is refused at once, and a
// hold with no token refuses to wait at all (red team, session 37: an
// image planted the release file in its output directory, which Docker
// copied into the empty volume, and the workload started unobserved).
func TestHoldRefusesAFileItDidNotGet(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plant func(path string) error
	}{
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
		{"another token", func(p string) error { return os.WriteFile(p, []byte("guess"), 0o644) }},
		{"token with more", func(p string) error { return os.WriteFile(p, []byte(token+"x"), 0o644) }},
		{"link to the token", func(p string) error {
			real := filepath.Join(filepath.Dir(p), "real")
			if err := os.WriteFile(real, []byte(token), 0o644); err != nil {
				return err
			}
			return os.Symlink(real, p)
		}},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), File)
			if err := tt.plant(file); err != nil {
				t.Fatal(err)
			}
			err := Wait(context.Background(), file, token, time.Second)
			if err == nil || !strings.Contains(err.Error(), "not the harness's") {
				t.Fatalf("got %v, want the planted file refused", err)
			}
		})
	}
	if err := Wait(context.Background(), filepath.Join(t.TempDir(), File), "", time.Second); err == nil || !strings.Contains(err.Error(), "no release token") {
		t.Fatalf("got %v, want a hold without a token refused", err)
	}
}

func TestHoldFromEnvUnsets(t *testing.T) {
	file := filepath.Join(t.TempDir(), File)
	if err := os.WriteFile(file, []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, file)
	t.Setenv(TokenEnv, token)
	if err := FromEnv(context.Background(), Timeout); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{Env, TokenEnv} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s is still set (%q): a child would wait for a file that is gone", k, v)
		}
	}
}

// TestBothEnds: the file the host releases is the one the plan names,
// and holds the token the role waits for; CreateReleaseFile (the
// engine-only release) writes the same.
func TestBothEnds(t *testing.T) {
	out := t.TempDir()
	role := "agent"
	if err := os.Mkdir(filepath.Join(out, role), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, Path(filepath.Join(out, role)))
	t.Setenv(TokenEnv, token)
	write := func(name string, data []byte) error { return os.WriteFile(filepath.Join(out, name), data, 0o644) }
	if err := Release(role, token, write); err != nil {
		t.Fatal(err)
	}
	if err := FromEnv(context.Background(), time.Second); err != nil {
		t.Fatalf("the released file is not the one waited for: %v", err)
	}
	file := Path(filepath.Join(out, role))
	if err := CreateReleaseFile(file, token); err != nil {
		t.Fatal(err)
	}
	if err := Wait(context.Background(), file, token, time.Second); err != nil {
		t.Fatalf("CreateReleaseFile's file is not taken: %v", err)
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
	err := Wait(ctx, filepath.Join(t.TempDir(), File), token, Timeout)
	if err == nil || !strings.Contains(err.Error(), "stopped while held") {
		t.Fatalf("got %v, want stopped while held", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %s", d)
	}
}

// TestHoldWaitsForTheWholeToken: the harness creates the release file,
// then writes the token; a role that looks in between waits for the rest
// (32 concurrent runs saw an empty file and refused to start).
func TestHoldWaitsForTheWholeToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), File)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = f.WriteString(token[:2])
		time.Sleep(50 * time.Millisecond)
		_, _ = f.WriteString(token[2:])
		f.Close()
	}()
	if err := Wait(context.Background(), file, token, 5*time.Second); err != nil {
		t.Fatalf("a release file written in two steps: %v", err)
	}
}
