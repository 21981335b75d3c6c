package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHold(t *testing.T) {
	if err := hold(""); err != nil {
		t.Fatalf("no hold file: %v", err)
	}
	file := filepath.Join(t.TempDir(), ".mcpsidecar-start")
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.WriteFile(file, nil, 0o644)
	}()
	start := time.Now()
	if err := hold(file); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Error("hold returned before the file existed")
	}
	if _, err := os.Lstat(file); err == nil {
		t.Error("the hold file was not removed")
	}

	old := holdTimeout
	holdTimeout = 30 * time.Millisecond
	defer func() { holdTimeout = old }()
	if err := hold(filepath.Join(t.TempDir(), "never")); err == nil || !strings.Contains(err.Error(), "not released") {
		t.Fatalf("got %v, want a timeout", err)
	}
}

func TestHoldFromEnvUnsets(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".mcpsidecar-start")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(holdEnv, file)
	if err := holdFromEnv(); err != nil {
		t.Fatal(err)
	}
	if v, ok := os.LookupEnv(holdEnv); ok {
		t.Errorf("%s is still set (%q): a child would wait for a file that is gone", holdEnv, v)
	}
}
