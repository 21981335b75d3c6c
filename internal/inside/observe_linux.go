package inside

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ObserveRole finds the role's main process in this pid namespace
// (the lowest pid that is neither this process nor docker-init) and reads
// its status until it shows the role's own hardening applied (seccomp
// filter mode with two filters or more, no_new_privs) or timeout passes;
// it returns the last status read. It fails when no process other than
// this one and docker-init was ever found. A held role waits, hardened,
// for its release (internal/hold), so the first reads that find it
// hardened are what it runs with.
func ObserveRole(timeout time.Duration) (ProcStatus, error) {
	deadline := time.Now().Add(timeout)
	var last ProcStatus
	seen := false
	for {
		st, err := readRoleStatus()
		if err == nil {
			last, seen = st, true
			if st.Seccomp == 2 && st.SeccompFilters >= 2 && st.NoNewPrivs {
				return st, nil
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

// readRoleStatus reads the status of the lowest pid in /proc that is not
// this process and not docker-init.
func readRoleStatus() (ProcStatus, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return ProcStatus{}, err
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	for _, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) == "docker-init" {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		return ParseStatus(string(data))
	}
	return ProcStatus{}, errors.New("no role process in this pid namespace")
}
