//go:build linux

package rootlesshost

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// teardown removes what Start created: the engine's containers, networks
// and volumes, the daemon and every process of the user, its data root
// and runtime directory, and /dev/net/tun's mode. It fails the test for a
// process of the user still there after the daemon stopped.
func (e *Engine) teardown(t testing.TB) {
	t.Helper()
	if e.exited != nil {
		e.removeObjects(t)
		e.stop(t)
	}
	// rootlesskit's end is not its children's: containerd and
	// slirp4netns may take a moment more to exit.
	for end := time.Now().Add(10 * time.Second); len(userPids(e.UID)) > 0 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range userPids(e.UID) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		t.Errorf("rootlesshost: process %d of %s (%s) still there after the engine stopped: killed", pid, UserName,
			strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, dir := range []string{e.DataRoot, e.Runtime} {
		if dir != "" {
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("rootlesshost: removing %s: %v", dir, err)
			}
		}
	}
	if e.tunMode != 0 {
		if err := os.Chmod("/dev/net/tun", e.tunMode); err != nil {
			t.Errorf("rootlesshost: restoring /dev/net/tun's mode: %v", err)
		}
	}
}

// removeObjects removes every container, user network and volume of the
// engine (it is the test's alone).
func (e *Engine) removeObjects(t testing.TB) {
	t.Helper()
	if ids, err := e.DockerErr("ps", "-aq"); err == nil && ids != "" {
		if _, err := e.DockerErr(append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)...); err != nil {
			t.Errorf("rootlesshost: removing the engine's containers: %v", err)
		}
	}
	if ids, err := e.DockerErr("network", "ls", "-q", "--filter", "type=custom"); err == nil && ids != "" {
		if _, err := e.DockerErr(append([]string{"network", "rm"}, strings.Fields(ids)...)...); err != nil {
			t.Errorf("rootlesshost: removing the engine's networks: %v", err)
		}
	}
	if ids, err := e.DockerErr("volume", "ls", "-q"); err == nil && ids != "" {
		if _, err := e.DockerErr(append([]string{"volume", "rm", "-f"}, strings.Fields(ids)...)...); err != nil {
			t.Errorf("rootlesshost: removing the engine's volumes: %v", err)
		}
	}
}

// stop ends the daemon: SIGTERM to rootlesskit (the process Start
// started), which passes it to dockerd; after 30 s its process group is
// killed.
func (e *Engine) stop(t testing.TB) {
	t.Helper()
	pid := e.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-e.exited:
		return
	case <-time.After(30 * time.Second):
	}
	t.Errorf("rootlesshost: the engine (rootlesskit %d) did not stop in 30 s after SIGTERM: its process group killed", pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-e.exited
}

// userPids lists the processes whose real uid is uid.
func userPids(uid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
