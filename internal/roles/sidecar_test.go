//go:build linux

package roles

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSidecarUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sidecar", "--port", "0"}, "--port 0: want 1-65535"},
		{[]string{"sidecar", "--port", "70000"}, "--port 70000"},
		{[]string{"sidecar", "--upstream-timeout", "0s"}, "--upstream-timeout 0s: want a positive duration"},
		{[]string{"sidecar", "--max-sessions", "0"}, "--max-sessions 0: want at least 1"},
		{[]string{"sidecar", "--max-body-bytes", "10"}, "--max-body-bytes 10"},
		{[]string{"sidecar", "--port", "8000", "--upstream-url", "ftp://x/mcp"}, "want an absolute http(s) URL"},
		{[]string{"sidecar", "stray"}, "unknown command"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("code %d stderr %q, want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// TestSidecarServesAndShutsDown runs the command on a free loopback port,
// waits for /healthz, cancels (as SIGTERM does through main's context) and
// expects exit 0 and an audit log file.
func TestSidecarServesAndShutsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	audit := filepath.Join(t.TempDir(), "mcp-sidecar-tool-calls.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"sidecar", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--audit-log", audit, "--upstream-url", "http://127.0.0.1:1/mcp"}, Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb})
	}()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar never became ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit code %d, want 0; stderr %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sidecar did not shut down")
	}
	if _, err := os.Stat(audit); err != nil {
		t.Errorf("audit log: %v", err)
	}
}

// TestSidecarRefusesBadHardenPolicy: a malformed policy stops the role
// before it serves (the wiring to hardenRole is in place).
func TestSidecarRefusesBadHardenPolicy(t *testing.T) {
	t.Setenv("MCPSIDECAR_HARDEN_POLICY", "{not json")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	code, _, stderr := run(t, "sidecar", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--upstream-url", "http://127.0.0.1:1/mcp")
	if code != exitUsage || !strings.Contains(stderr, "MCPSIDECAR_HARDEN_POLICY") {
		t.Fatalf("code %d stderr %q, want %d naming the policy variable", code, stderr, exitUsage)
	}
}
