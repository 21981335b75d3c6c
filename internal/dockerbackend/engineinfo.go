package dockerbackend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// The engine's machine and mode (issue 29): its architecture, which the
// role binary must be built for; rootless Docker, whose bridges live in
// rootlesskit's network namespace (not this host's), whose host-gateway is
// that namespace's bridge (moby#47684) and whose container uids are this
// host's sub-uids; and the resource limits it can enforce (none at all for
// a rootless engine over cgroup v1, which drops them with a warning only).

// EnvAllowNoLimits ("1") accepts an engine that cannot enforce the roles'
// memory, process-count or CPU limits, recorded as a degradation.
const EnvAllowNoLimits = "MCPSIDECAR_ALLOW_NO_LIMITS"

// checkEngineInfo reads the engine's machine and mode, records them, and
// refuses what cannot hold there: the Docker backend's preflight (a
// cluster's nodes are not the engine).
func (b *backend) checkEngineInfo(ctx context.Context, v dockerx.EngineVersion) error {
	info, err := b.r.Engine().Info(ctx)
	if err != nil {
		return exitcode.WithHint(exitcode.Unavailable, err, "is the Docker daemon running and is its socket readable by you? (DOCKER_HOST)")
	}
	e := &b.r.Metadata().Engine
	e.OS, e.Arch, e.Machine = v.OS, v.Arch, info.Architecture
	if e.Arch == "" { // an engine whose /version names no Arch
		e.Arch = dockerx.GoArch(info.Architecture)
	}
	if e.OS == "" {
		e.OS = info.OSType
	}
	e.Rootless, e.CgroupDriver = info.Rootless, info.CgroupDriver
	if info.Rootless {
		if err := b.checkRootless(); err != nil {
			return err
		}
	}
	return b.checkLimits(info)
}

// checkRootless refuses what a rootless engine cannot give: host
// directories as output (the roles' uid is a sub-uid of the engine's user
// here, and the host's noexec mount is not in rootlesskit's mount
// namespace), and host.docker.internal (host-gateway is the bridge inside
// rootlesskit's network namespace, not this host: moby#47684).
func (b *backend) checkRootless() error {
	if b.r.Getenv(EnvOutput) == "bind" {
		return exitcode.WithHint(exitcode.Unavailable,
			fmt.Errorf("%s=bind: the engine is rootless Docker, which maps the roles' uids to sub-uids of its own user and mounts in rootlesskit's namespace: host directories cannot be made the roles' private noexec output", EnvOutput),
			"leave "+EnvOutput+" unset (the output goes through the engine's volumes)")
	}
	if b.r.Profile() == nil {
		return nil
	}
	for role, c := range b.r.Profile().Containers {
		if slices.Contains(c.ExtraHosts, netpolicy.HostGateway+":host-gateway") {
			return exitcode.WithHint(exitcode.Unavailable,
				fmt.Errorf("the spec lets the %s reach %s, and the engine is rootless Docker: its host-gateway is the bridge inside rootlesskit's network namespace, not this host (moby#47684), so a service on this host is not there", role, netpolicy.HostGateway),
				"name the service by an address the gateway can reach, or run it against a rootful engine")
		}
	}
	return nil
}

// checkLimits refuses an engine that would drop the roles' memory,
// process-count or CPU limits (it only warns on create), unless the user
// accepts it with EnvAllowNoLimits; then it is a degradation. Threat: a
// workload that exhausts the host's memory or processes.
func (b *backend) checkLimits(info dockerx.EngineInfo) error {
	var missing []string
	for _, l := range []struct {
		ok   bool
		name string
	}{{info.MemoryLimit, "memory"}, {info.PidsLimit, "process-count (pids)"}, {info.CPULimit, "CPU (CFS quota)"}} {
		if !l.ok {
			missing = append(missing, l.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	why := fmt.Sprintf("cgroup driver %q, cgroup v%s", info.CgroupDriver, cmp.Or(info.CgroupVersion, "1"))
	if info.Rootless && info.CgroupDriver == "none" {
		why = "rootless Docker over cgroup v1 runs with cgroup driver \"none\""
	}
	msg := fmt.Sprintf("the engine cannot enforce the roles' %s limits (%s): it would drop them with a warning, and a workload could exhaust this machine's memory or processes",
		strings.Join(missing, ", "), why)
	if b.r.Getenv(EnvAllowNoLimits) != "1" {
		return exitcode.WithHint(exitcode.Unavailable, errors.New(msg),
			"run the engine on cgroup v2 with the cpu, memory and pids controllers delegated to it (rootless: systemd's Delegate=yes), or accept it with "+EnvAllowNoLimits+"=1")
	}
	m := b.r.Metadata()
	m.Degradations = append(m.Degradations, msg+"; accepted by "+EnvAllowNoLimits+"=1: the roles keep their rlimits (processes per user, open files, file size) and their tmpfs sizes")
	b.r.Warn("the engine cannot enforce the roles' %s limits; accepted by %s=1 (run-metadata.json, degradations)", strings.Join(missing, ", "), EnvAllowNoLimits)
	return nil
}
