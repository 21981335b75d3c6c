package dockerx

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWatchExit: a process is watched only when its cgroup names the
// container; its end closes the channel; stop ends the watch.
func TestWatchExit(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	if WatchExit(os.Getpid(), "0123456789abcdef0123", stop) != nil {
		t.Error("a process outside the container's cgroup was watched")
	}
	if WatchExit(1<<30, "0123456789abcdef0123", stop) != nil {
		t.Error("a pid that does not exist was watched")
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatalf("reading /proc/self/cgroup: %v (WatchExit needs Linux's /proc)", err)
	}
	cmd := exec.Command("sleep", "0.2")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sleep: %v", err)
	}
	defer cmd.Wait()
	// The child shares this process's cgroup: a line of it stands for
	// the container's id.
	id := ""
	for _, line := range strings.Split(string(cg), "\n") {
		if len(line) > len(id) {
			id = line
		}
	}
	done := WatchExit(cmd.Process.Pid, id, stop)
	if done == nil {
		t.Fatalf("process %s in cgroup %q was not watched", strconv.Itoa(cmd.Process.Pid), id)
	}
	select {
	case <-done:
		t.Fatal("the end was reported while the process still ran")
	case <-time.After(50 * time.Millisecond):
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the end of the process was not reported")
	}
}
