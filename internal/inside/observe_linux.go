package inside

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ObserveRole reads every process in this pid namespace but this one and
// docker-init (the role's, and under the launcher the supervisor and the
// stage that executes the workload) until each shows the role's own
// hardening applied (inside.ProcStatus.Hardened), or timeout passes; it
// returns the weakest status read last, so a check judges the least
// hardened process. It fails when no process other than this one and
// docker-init was ever found. A held role waits, hardened, for its
// release (internal/hold), so what is read is what it runs with.
func ObserveRole(timeout time.Duration) (ProcStatus, error) {
	deadline := time.Now().Add(timeout)
	var last ProcStatus
	seen := false
	for {
		sts, err := readRoleStatuses()
		if err == nil {
			last, seen = Weakest(sts...), true
			if last.Hardened() {
				return last, nil
			}
		}
		if time.Now().After(deadline) {
			if !seen {
				return ProcStatus{}, fmt.Errorf("no role process found in the pid namespace within %s: %v", timeout, err)
			}
			return last, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readRoleStatuses reads the status of every process in /proc that is
// not this process and not docker-init.
func readRoleStatuses() ([]ProcStatus, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var sts []ProcStatus
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) == "docker-init" {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // ended since the listing
		}
		st, err := ParseStatus(string(data))
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		sts = append(sts, st)
	}
	if len(sts) == 0 {
		return nil, errors.New("no role process in this pid namespace")
	}
	return sts, nil
}
