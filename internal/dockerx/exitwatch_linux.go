package dockerx

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// WatchExit returns a channel closed once process pid, the init of the
// container whose id is containerID, has ended: the kernel's word, which
// comes before the engine has noticed the exit and reported it. It returns
// nil when the process cannot be watched: not found on this host (the
// engine may be on another), not in that container's cgroup (its pid is
// another process's now), or no pidfd (Linux before 5.3). Closing stop
// ends the watch.
func WatchExit(pid int, containerID string, stop <-chan struct{}) <-chan struct{} {
	if pid <= 0 || len(containerID) < 12 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	// The pidfd holds the process it was opened on; the cgroup, read
	// after, says it is the container's. Had that process ended and its
	// pid been taken meanwhile, the new one is not in the container's
	// cgroup (a container whose init has ended has no process left).
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil || !strings.Contains(string(cg), containerID) {
		unix.Close(fd)
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 50)
			if err != nil && err != unix.EINTR {
				return // cannot say: the engine's report stands
			}
			if n > 0 && fds[0].Revents != 0 {
				close(done)
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	return done
}
