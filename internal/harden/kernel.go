package harden

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Kernel is the kernel a role ran on, measured from inside its container
// before anything was restricted: the engine's kernel, which is not this
// host's when the engine lives in a VM (Docker Desktop, OrbStack, Colima)
// or on another machine. Whether it has Landlock is
// [Report.KernelLandlockABI]; whether the seccomp filter loaded is
// Seccomp; the limits are the container's cgroup as seen from
// inside, so an engine that drops them shows no limit here.
type Kernel struct {
	// Release is uname's release ("6.18.44").
	Release string `json:"release"`
	// Seccomp says whether the role's own seccomp filter loaded:
	// [SeccompLoaded], "refused: " and the kernel's error, or empty when
	// the role stopped before trying (a Landlock layer refused first).
	Seccomp string `json:"seccomp,omitempty"`
	// Cgroup is "v1" or "v2": the hierarchy the container sees.
	Cgroup string `json:"cgroup,omitempty"`
	// MemoryLimitBytes and PidsLimit are the container's cgroup limits;
	// 0 when the cgroup sets none ("max").
	MemoryLimitBytes int64 `json:"memory_limit_bytes"`
	PidsLimit        int64 `json:"pids_limit"`
	// Error says what could not be measured.
	Error string `json:"error,omitempty"`
}

// SeccompLoaded is [Kernel.Seccomp] when the filter was installed.
const SeccompLoaded = "loaded"

// cgroupRoot is where a container sees its own cgroup (a private cgroup
// namespace: its own cgroup is the root).
const cgroupRoot = "/sys/fs/cgroup"

// unlimitedV1 is the least value cgroup v1 reports for "no memory limit"
// (PAGE_COUNTER_MAX pages, 9223372036854771712 with 4 KiB pages).
const unlimitedV1 = int64(1) << 62

// readCgroupLimits fills k's cgroup fields from fsys, a view of
// [cgroupRoot]: cgroup v2 when it holds cgroup.controllers, else v1's
// memory and pids hierarchies.
func readCgroupLimits(fsys fs.FS, k *Kernel) {
	memFile, pidsFile := "memory/memory.limit_in_bytes", "pids/pids.max"
	k.Cgroup = "v1"
	if _, err := fs.Stat(fsys, "cgroup.controllers"); err == nil {
		memFile, pidsFile = "memory.max", "pids.max"
		k.Cgroup = "v2"
	}
	var errs []error
	var err error
	if k.MemoryLimitBytes, err = readLimit(fsys, memFile); err != nil {
		errs = append(errs, err)
	}
	if k.PidsLimit, err = readLimit(fsys, pidsFile); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		k.Error = errors.Join(errs...).Error()
	}
}

// readLimit reads one cgroup limit file: "max" (or v1's huge value) is
// no limit, 0.
func readLimit(fsys fs.FS, name string) (int64, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path.Join(cgroupRoot, name), err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("reading %s: %q is not a limit", path.Join(cgroupRoot, name), s)
	}
	if n >= unlimitedV1 {
		return 0, nil
	}
	return n, nil
}
