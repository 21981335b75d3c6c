//go:build docker

package e2e

// Shared helpers for the Docker end-to-end tests: the binary under test
// ($MCPSIDECAR_BIN, set by `make e2e`, or built once into a temporary
// directory), running the CLI with labels that mark everything it creates
// as a test's, and counting what a run left behind.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLabel marks every container, network and image an e2e test creates.
const TestLabel = "mcpsidecar.test=1"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// NeedDocker fails (never skips) when the engine is not reachable.
func NeedDocker(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("the docker e2e tests need a running Docker engine: %v: %s", err, out)
	}
}

// testTags are the build tags of every binary the e2e tests build: the
// test binary has the hidden commands the harness's own tests drive
// (x-sleep, harden-selftest, --x-workload-cmd, --x-gateway-cmd); the
// product (`make build`) has none of them.
const testTags = "testcommands"

// Binary returns the static mcpsidecar binary under test: $MCPSIDECAR_BIN
// (`make e2e` sets it to bin/mcpsidecar-test), or one built once per test
// process with CGO_ENABLED=0 and -tags testcommands.
func Binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MCPSIDECAR_BIN"); p != "" {
		return p
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpsidecar-e2e-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "mcpsidecar")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-trimpath", "-tags", testTags, "-ldflags", "-s -w", "-o", binPath, "./cmd/mcpsidecar")
		cmd.Dir = filepath.Dir(filepath.Dir(file))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = &buildError{err: err, out: string(out)}
		}
	})
	if binErr != nil {
		t.Fatalf("building mcpsidecar: %v", binErr)
	}
	return binPath
}

var (
	testCmdsMu  sync.Mutex
	testCmdsBin = map[string]error{}
)

// BinaryWithTestCommands is [Binary] for a test that drives the test-only commands:
// it fails, saying how to build the right one, when the binary under test
// is the product (built without -tags testcommands).
func BinaryWithTestCommands(t *testing.T) string {
	t.Helper()
	bin := Binary(t)
	testCmdsMu.Lock()
	err, checked := testCmdsBin[bin]
	if !checked {
		if out, xerr := exec.Command(bin, "x-sleep", "0s").CombinedOutput(); xerr != nil {
			err = fmt.Errorf("%s has no test commands (%v: %s): it is a product binary; build the test binary with "+
				"`make testbin` (bin/mcpsidecar-test, -tags %s) and point MCPSIDECAR_BIN at it; `make e2e` does both",
				bin, xerr, strings.TrimSpace(string(out)), testTags)
		}
		testCmdsBin[bin] = err
	}
	testCmdsMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// usesTestCommands reports whether a command line needs the test binary.
func usesTestCommands(args []string) bool {
	for _, a := range args {
		switch {
		case a == "x-sleep", a == "harden-selftest", strings.HasPrefix(a, "--x-workload-cmd"), strings.HasPrefix(a, "--x-gateway-cmd"):
			return true
		}
	}
	return false
}

// repoRoot is the module root, from this file's location.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("locating the repository")
	}
	return filepath.Dir(filepath.Dir(file))
}

// goBuild builds a static binary of pkg to out, with the test tags.
func goBuild(t *testing.T, pkg, out string, ldflags ...string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-tags", testTags, "-ldflags=-s -w "+strings.Join(ldflags, " "), "-o", out, pkg)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	return out
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// docker runs the docker CLI and returns its trimmed stdout; an error
// fails the test.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := dockerErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dockerErr runs the docker CLI and returns its trimmed stdout, or an
// error naming the command and carrying its stderr.
func dockerErr(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("docker", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// scratchImage builds tag FROM scratch from a fresh context holding
// dockerfile, the static binaries in bins (name in the context -> host
// path, mode 0755) and the files in text (name -> content, mode 0644),
// labelled with labels; the image is removed at the end of the test.
func scratchImage(t *testing.T, tag, dockerfile string, bins, text map[string]string, labels ...string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), data, mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, path := range bins {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		write(name, data, 0o755)
	}
	for name, content := range text {
		write(name, []byte(content), 0o644)
	}
	write("Dockerfile", []byte(dockerfile), 0o644)
	t.Cleanup(func() { _, _ = dockerErr("rmi", "-f", tag) })
	args := []string{"build", "-q"}
	for _, l := range labels {
		args = append(args, "--label", l)
	}
	docker(t, append(args, "-t", tag, dir)...)
	return tag
}

// RandHex returns n random bytes as hex, for unique test ids.
func RandHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// CLI is one invocation of the binary under test.
type CLI struct {
	Cmd    *exec.Cmd
	Stdout bytes.Buffer
	Stderr syncBuffer
}

// NewCLI prepares `mcpsidecar args...` whose resources carry the test label
// and mcpsidecar.e2e=<id>, plus env entries.
func NewCLI(t *testing.T, id string, env []string, args ...string) *CLI {
	t.Helper()
	bin := Binary(t)
	if usesTestCommands(args) {
		bin = BinaryWithTestCommands(t)
	}
	c := &CLI{Cmd: exec.Command(bin, args...)}
	c.Cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS="+TestLabel+",mcpsidecar.e2e="+id)
	c.Cmd.Env = append(c.Cmd.Env, env...)
	c.Cmd.Stdout, c.Cmd.Stderr = &c.Stdout, &c.Stderr
	return c
}

// RunCLI runs the CLI to the end and returns its exit code.
func RunCLI(t *testing.T, id string, env []string, args ...string) (*CLI, int) {
	t.Helper()
	c := NewCLI(t, id, env, args...)
	err := c.Cmd.Run()
	return c, exitCode(t, err)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("running mcpsidecar: %v", err)
	return -1
}

// WaitFor polls stderr until it contains s or the timeout passes.
func (c *CLI) WaitFor(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(c.Stderr.String(), s) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("mcpsidecar did not print %q within %s; stderr:\n%s", s, timeout, c.Stderr.String())
}

// syncBuffer is a bytes.Buffer safe to read while the process writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Leftovers lists the containers and networks carrying label (k=v).
func Leftovers(t *testing.T, label string) (containers, networks []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func(args ...string) []string {
		out, err := exec.CommandContext(ctx, "docker", args...).Output()
		if err != nil {
			t.Fatalf("docker %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	containers = list("ps", "-aq", "--filter", "label="+label)
	networks = list("network", "ls", "-q", "--filter", "label="+label)
	return containers, networks
}

// LeftVolumes lists the volumes carrying label (a run whose output went
// through the engine makes one per role).
func LeftVolumes(t *testing.T, label string) []string {
	t.Helper()
	out, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "label="+label).Output()
	if err != nil {
		t.Fatalf("docker volume ls: %v", err)
	}
	return strings.Fields(string(out))
}

// CleanupLabelled removes, at the end of the test, every container and
// network carrying label; register it before creating anything.
func CleanupLabelled(t *testing.T, label string) {
	t.Helper()
	t.Cleanup(func() {
		cs, ns := Leftovers(t, label)
		if len(cs) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, cs...)...).Run()
		}
		if len(ns) > 0 {
			_ = exec.Command("docker", append([]string{"network", "rm"}, ns...)...).Run()
		}
		if vs := LeftVolumes(t, label); len(vs) > 0 {
			_ = exec.Command("docker", append([]string{"volume", "rm", "-f"}, vs...)...).Run()
		}
	})
}

// RequireNothingLeft fails when any container or network carries label.
func RequireNothingLeft(t *testing.T, label string) {
	t.Helper()
	cs, ns := Leftovers(t, label)
	vs := LeftVolumes(t, label)
	if len(cs) > 0 || len(ns) > 0 || len(vs) > 0 {
		t.Errorf("left behind: containers %v, networks %v, volumes %v (label %s)", cs, ns, vs, label)
	}
}
