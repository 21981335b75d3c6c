package inside

import (
	"fmt"
	"strconv"
	"strings"
)

// ProcStatus is what the host reads of a container process in
// /proc/<pid>/status: the kernel's own account of its restrictions, which
// the process cannot forge (unlike a report it writes).
type ProcStatus struct {
	Seccomp        int    `json:"seccomp"`         // 2: filter mode
	SeccompFilters int    `json:"seccomp_filters"` // filters stacked on the process
	NoNewPrivs     bool   `json:"no_new_privs"`
	CapEff         uint64 `json:"cap_eff"`
	CapPrm         uint64 `json:"cap_prm"`
	UID            int    `json:"uid"` // effective, in the host's user namespace
}

// ParseStatus reads the fields of ProcStatus from a /proc/<pid>/status
// text; a missing Seccomp, NoNewPrivs, CapEff or Uid line is an error.
func ParseStatus(text string) (ProcStatus, error) {
	var st ProcStatus
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		var err error
		switch key {
		case "Seccomp":
			st.Seccomp, err = strconv.Atoi(f[0])
		case "Seccomp_filters":
			st.SeccompFilters, err = strconv.Atoi(f[0])
		case "NoNewPrivs":
			st.NoNewPrivs = f[0] == "1"
		case "CapEff":
			st.CapEff, err = strconv.ParseUint(f[0], 16, 64)
		case "CapPrm":
			st.CapPrm, err = strconv.ParseUint(f[0], 16, 64)
		case "Uid":
			if len(f) > 1 {
				st.UID, err = strconv.Atoi(f[1])
			}
		default:
			continue
		}
		if err != nil {
			return st, fmt.Errorf("reading %s in process status: %w", key, err)
		}
		seen[key] = true
	}
	for _, k := range []string{"Seccomp", "NoNewPrivs", "CapEff", "Uid"} {
		if !seen[k] {
			return st, fmt.Errorf("process status has no %s line", k)
		}
	}
	return st, nil
}

// Hardened reports whether st shows a role's own hardening applied: the
// seccomp filter mode with two filters or more (the engine's and the
// role's own), no_new_privs, no effective capability, not root.
func (st ProcStatus) Hardened() bool {
	return st.Seccomp == 2 && st.SeccompFilters >= 2 && st.NoNewPrivs && st.CapEff == 0 && st.UID != 0
}

// Weakest is the least hardened of statuses, the one a check must judge
// when every process of a role's container must hold: one not hardened
// before any that is, then the fewest seccomp filters. It is the zero
// ProcStatus for none.
func Weakest(statuses ...ProcStatus) ProcStatus {
	var w ProcStatus
	for i, st := range statuses {
		if i == 0 || weaker(st, w) {
			w = st
		}
	}
	return w
}

func weaker(a, b ProcStatus) bool {
	if a.Hardened() != b.Hardened() {
		return !a.Hardened()
	}
	return a.SeccompFilters < b.SeccompFilters
}
