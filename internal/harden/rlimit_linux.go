//go:build linux

package harden

import (
	"fmt"
	"syscall"
)

var rlimitResources = map[string]int{"fsize": syscall.RLIMIT_FSIZE, "nofile": syscall.RLIMIT_NOFILE}

// ApplyRlimits sets each limit on the calling process, where the engine
// set none (Kubernetes), before [Apply]: the process's children inherit
// them and an execve keeps them, so a launcher's workload runs under
// them too. A limit is never raised: where the one in force is lower, it
// stays. It returns the layer's status for the [Report].
func ApplyRlimits(ls []Rlimit) (LayerStatus, error) {
	st := LayerStatus{Name: LayerRlimits, Required: true}
	set := make([]Rlimit, 0, len(ls))
	for _, r := range ls {
		if err := r.validate(); err != nil {
			return st, err
		}
		res := rlimitResources[r.Name]
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(res, &cur); err != nil {
			return st, fmt.Errorf("reading the %s limit: %w", r.Name, err)
		}
		soft, hard := lowered(r, cur.Max)
		// The syscall package's Setrlimit: for nofile it also keeps the
		// Go runtime from restoring its start-up soft limit in the
		// processes this one starts.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: soft, Max: hard}); err != nil {
			return st, fmt.Errorf("setting the %s limit to %d:%d: %w", r.Name, soft, hard, err)
		}
		set = append(set, Rlimit{Name: r.Name, Soft: soft, Hard: hard})
	}
	st.Enforced, st.Detail = true, rlimitsDetail(set)
	return st, nil
}
