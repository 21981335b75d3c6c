package dockerx

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/client"
)

// EngineInfo is what the engine's /info says of the machine and mode it
// runs in: what the host must check before it trusts the engine with a
// run (issue 29).
type EngineInfo struct {
	// Architecture is the engine's machine as uname reports it
	// ("x86_64", "aarch64").
	Architecture string `json:"architecture"`
	// OSType is "linux" for a Linux engine.
	OSType string `json:"os_type"`
	// SecurityOptions are the engine's ("name=seccomp,profile=default",
	// "name=rootless", ...).
	SecurityOptions []string `json:"security_options"`
	// Rootless is set when SecurityOptions carry "name=rootless": the
	// engine runs as a user, in rootlesskit's user and network
	// namespaces.
	Rootless bool `json:"rootless"`
	// CgroupDriver and CgroupVersion are the engine's ("none" on a
	// rootless engine over cgroup v1: no resource limit at all).
	CgroupDriver  string `json:"cgroup_driver"`
	CgroupVersion string `json:"cgroup_version,omitempty"`
	// MemoryLimit, PidsLimit and CPULimit say whether the engine can
	// enforce a container's memory, process-count and CPU (CFS quota)
	// limits; where it cannot, it drops them with a warning only.
	MemoryLimit bool `json:"memory_limit"`
	PidsLimit   bool `json:"pids_limit"`
	CPULimit    bool `json:"cpu_limit"`
}

// rootlessOption is the security option a rootless engine reports.
const rootlessOption = "name=rootless"

// isRootless reports whether security options name a rootless engine.
func isRootless(opts []string) bool {
	return slices.ContainsFunc(opts, func(o string) bool {
		return o == rootlessOption || strings.HasPrefix(o, rootlessOption+",")
	})
}

// Info asks the engine about its machine and mode; the answer is kept
// for the client's life once it has come.
func (c *Client) Info(ctx context.Context) (EngineInfo, error) {
	c.infoMu.Lock()
	defer c.infoMu.Unlock()
	if c.info != nil {
		return *c.info, nil
	}
	res, err := c.api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return EngineInfo{}, fmt.Errorf("asking the docker daemon for its info: %w", err)
	}
	in := res.Info
	ei := EngineInfo{Architecture: in.Architecture, OSType: in.OSType, SecurityOptions: in.SecurityOptions,
		Rootless: isRootless(in.SecurityOptions), CgroupDriver: in.CgroupDriver, CgroupVersion: in.CgroupVersion,
		MemoryLimit: in.MemoryLimit, PidsLimit: in.PidsLimit, CPULimit: in.CPUCfsQuota}
	c.info, c.kernel = &ei, in.KernelVersion
	return ei, nil
}

// GoArch is the Go architecture name (what /version's Arch says) of a
// machine name uname reports (what /info's Architecture says); "" when
// it is not one the role binary is built for.
func GoArch(machine string) string {
	switch machine {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	}
	return ""
}
