//go:build docker

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// TestProveRefusesHostNamespaces (red team of issue 32): a process of
// this host in a pid namespace of its own, moved into a cgroup named
// /docker/<id> as a container's would be, is not that container's: it
// shares this host's network namespace, and the proof refuses it (the
// host would otherwise dial, read sockets and drop routes in its own
// namespace). Needs root, as the e2e tests do.
func TestProveRefusesHostNamespaces(t *testing.T) {
	id := RandHex(32)
	group := "/sys/fs/cgroup/pids/docker/" + id // cgroup v1
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err != nil {
		group = "/sys/fs/cgroup/docker/" + id // v2
	}
	if err := os.MkdirAll(group, 0o755); err != nil {
		t.Fatalf("making the cgroup (root needed): %v", err)
	}
	t.Cleanup(func() { os.Remove(group) })
	created := time.Now().Add(-time.Second)
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var child int
	for deadline := time.Now().Add(5 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task", strconv.Itoa(cmd.Process.Pid), "children"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if child == 0 {
		t.Fatal("unshare's child never appeared")
	}
	if err := os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte(strconv.Itoa(child)), 0o644); err != nil {
		t.Fatalf("moving the child into the cgroup: %v", err)
	}
	t.Cleanup(func() { os.WriteFile("/sys/fs/cgroup/pids/cgroup.procs", []byte(strconv.Itoa(child)), 0o644) })
	p, err := dockerx.Prove(id, child, created)
	if err == nil {
		p.Close()
		t.Fatal("the proof accepted a process of this host's network namespace as the container's")
	}
	if !errors.Is(err, dockerx.ErrNotOnThisHost) || !strings.Contains(err.Error(), "shares this host's net namespace") {
		t.Errorf("proof error %v, want it refused for sharing this host's net namespace", err)
	}
}
