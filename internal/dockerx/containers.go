package dockerx

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// CreateContainer creates c on its first network and connects the others.
func (c *Client) CreateContainer(ctx context.Context, spec ContainerSpec) (string, error) {
	cfg, host, netCfg, err := translate(spec)
	if err != nil {
		return "", err
	}
	res, err := c.api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: spec.Name, Config: cfg, HostConfig: host, NetworkingConfig: netCfg,
	})
	if err != nil {
		return "", fmt.Errorf("creating container %s: %w", spec.Name, err)
	}
	for _, a := range spec.Networks[1:] {
		ep, err := endpoint(spec.Name, a)
		if err == nil {
			_, err = c.api.NetworkConnect(ctx, a.Network, client.NetworkConnectOptions{Container: res.ID, EndpointConfig: ep})
		}
		if err != nil {
			return res.ID, fmt.Errorf("connecting container %s to network %s: %w", spec.Name, a.Network, err)
		}
	}
	return res.ID, nil
}

// translate turns a ContainerSpec into the Engine API's three structs.
func translate(s ContainerSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig, error) {
	if len(s.Networks) == 0 {
		return nil, nil, nil, fmt.Errorf("container %s: no network given", s.Name)
	}
	env := make([]string, 0, len(s.Env))
	for _, e := range s.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	cfg := &container.Config{Image: s.Image, Cmd: s.Cmd, Entrypoint: s.Entrypoint, Env: env, User: s.User, WorkingDir: s.WorkingDir, Labels: s.Labels}
	if s.NoHealthcheck {
		cfg.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
	}
	if s.StopTimeout > 0 {
		secs := int(s.StopTimeout.Seconds())
		cfg.StopTimeout = &secs
	}
	host, err := hostConfig(s)
	if err != nil {
		return nil, nil, nil, err
	}
	first := s.Networks[0]
	if first.Network == "none" || strings.HasPrefix(first.Network, "container:") {
		return cfg, host, nil, nil
	}
	for _, a := range s.Networks[1:] { // connected after create: checked now, before anything exists
		if _, err := endpoint(s.Name, a); err != nil {
			return nil, nil, nil, err
		}
	}
	ep, err := endpoint(s.Name, first)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, host, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{first.Network: ep}}, nil
}

// endpoint is one attachment's endpoint settings: its aliases and, when
// set, its fixed IPv4 address.
func endpoint(name string, a Attachment) (*network.EndpointSettings, error) {
	ep := &network.EndpointSettings{Aliases: a.Aliases}
	if a.IPv4 == "" {
		return ep, nil
	}
	ip, err := netip.ParseAddr(a.IPv4)
	if err != nil || !ip.Is4() {
		return nil, fmt.Errorf("container %s: address %q on network %s: want an IPv4 address", name, a.IPv4, a.Network)
	}
	ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: ip}
	return ep, nil
}

func hostConfig(s ContainerSpec) (*container.HostConfig, error) {
	dns := make([]netip.Addr, 0, len(s.DNS))
	for _, d := range s.DNS {
		a, err := netip.ParseAddr(d)
		if err != nil {
			return nil, fmt.Errorf("container %s: dns server %q: %w", s.Name, d, err)
		}
		dns = append(dns, a)
	}
	binds := make([]string, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		// A Windows host's source starts with its drive ("C:"), which
		// Docker Desktop takes in a bind; filepath.VolumeName is "" on
		// Linux and macOS.
		if src := m.Source[len(filepath.VolumeName(m.Source)):]; strings.ContainsAny(src, ":,") || strings.ContainsAny(m.Target, ":,") {
			return nil, fmt.Errorf("container %s: mount path %q or %q contains ':' or ','", s.Name, m.Source, m.Target)
		}
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		if isVolumeName(m.Source) {
			// Never the image's content at the target copied into an
			// empty volume: an output volume holds only what the role
			// wrote (red team, session 37: an image planted the start
			// hold's release file in its output directory this way).
			mode += ",nocopy"
		}
		binds = append(binds, m.Source+":"+m.Target+":"+mode)
	}
	h := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.Networks[0].Network),
		Binds:          binds,
		ReadonlyRootfs: s.ReadOnlyRootfs,
		CapDrop:        s.CapDrop,
		CapAdd:         s.CapAdd,
		SecurityOpt:    securityOpt(s),
		Tmpfs:          s.Tmpfs,
		Sysctls:        s.Sysctls,
		DNS:            dns,
		DNSOptions:     s.DNSOptions,
		ExtraHosts:     s.ExtraHosts,
		MaskedPaths:    s.MaskedPaths,
		PidMode:        container.PidMode(s.PidMode),
		Resources: container.Resources{
			Memory: s.MemoryBytes, MemorySwap: s.MemorySwapBytes, NanoCPUs: s.NanoCPUs, Ulimits: ulimits(s.Ulimits),
		},
	}
	if s.PidsLimit > 0 {
		p := s.PidsLimit
		h.PidsLimit = &p
	}
	if s.Init {
		t := true
		h.Init = &t
	}
	if s.CgroupnsPrivate {
		h.CgroupnsMode = container.CgroupnsModePrivate
	}
	return h, nil
}

func ulimits(in []Ulimit) []*container.Ulimit {
	out := make([]*container.Ulimit, 0, len(in))
	for _, u := range in {
		out = append(out, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	return out
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	if _, err := c.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("starting container %s: %w", id, err)
	}
	return nil
}

// InspectContainer reports the container's state and addresses.
func (c *Client) InspectContainer(ctx context.Context, id string) (ContainerState, error) {
	res, err := c.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return ContainerState{}, fmt.Errorf("inspecting container %s: %w", id, err)
	}
	st := ContainerState{IPs: map[string]string{}}
	if t, err := time.Parse(time.RFC3339Nano, res.Container.Created); err == nil {
		st.Created = t
	}
	if s := res.Container.State; s != nil {
		st.Running, st.ExitCode, st.OOMKilled, st.Pid = s.Running, s.ExitCode, s.OOMKilled, s.Pid
	}
	if ns := res.Container.NetworkSettings; ns != nil {
		for name, ep := range ns.Networks {
			if ep != nil && ep.IPAddress.IsValid() {
				st.IPs[name] = ep.IPAddress.String()
			}
		}
	}
	return st, nil
}

// KillContainer sends signal to the container's init process.
func (c *Client) KillContainer(ctx context.Context, id, signal string) error {
	if _, err := c.api.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: signal}); err != nil {
		return fmt.Errorf("killing container %s: %w", id, err)
	}
	return nil
}

// RemoveContainer force-removes the container; one that is already gone is
// not an error, so teardown can be repeated. One whose removal another
// caller already started (two gc's, or a gc and the run's own teardown)
// is waited for until it is gone, up to removalWait: the engine refuses
// the second removal with a conflict, and the container is not gone yet.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	_, err := c.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil || IsNotFound(err):
		return nil
	case isConflict(err) && strings.Contains(err.Error(), "already in progress"):
		return c.awaitRemoved(ctx, id, err)
	}
	return fmt.Errorf("removing container %s: %w", id, err)
}

// removalWait bounds how long RemoveContainer waits for another caller's
// removal of the same container.
const removalWait = 30 * time.Second

// awaitRemoved polls the container until the engine no longer knows it;
// conflict is the engine's refusal, returned if it is still there.
func (c *Client) awaitRemoved(ctx context.Context, id string, conflict error) error {
	ctx, cancel := context.WithTimeout(ctx, removalWait)
	defer cancel()
	for {
		if _, err := c.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing container %s: another removal did not end within %s: %w", id, removalWait, conflict)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ListContainers lists every container, running or not, carrying labels.
func (c *Client) ListContainers(ctx context.Context, labels map[string]string) ([]Resource, error) {
	res, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	out := make([]Resource, 0, len(res.Items))
	for _, it := range res.Items {
		name := ""
		if len(it.Names) > 0 {
			name = strings.TrimPrefix(it.Names[0], "/")
		}
		out = append(out, Resource{ID: it.ID, Name: name, Labels: it.Labels})
	}
	return out, nil
}

func labelFilters(labels map[string]string) client.Filters {
	f := client.Filters{}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := labels[k]; v != "" {
			f.Add("label", k+"="+v)
		} else {
			f.Add("label", k)
		}
	}
	return f
}

// PeakMemory follows the container's stats stream. On cgroup v1 the engine
// reports max_usage (the kernel's own peak); on v2 only the current usage,
// so the highest sample is kept. The engine samples once a second, so a
// container that lives less than that would show nothing: when the daemon
// is local, the kernel's own peak counter in the container's cgroup is
// polled as well.
func (c *Client) PeakMemory(ctx context.Context, id string) func() uint64 {
	var peak atomic.Uint64
	res, err := c.api.ContainerStats(ctx, id, client.ContainerStatsOptions{Stream: true})
	if err == nil {
		go followStats(res.Body, &peak)
	}
	if strings.HasPrefix(c.api.DaemonHost(), "unix://") {
		go pollCgroupPeak(ctx, id, &peak)
	}
	return peak.Load
}

// cgroupPeakFiles are where the kernel keeps a container's memory peak,
// for the cgroupfs (v1, v2) and systemd (v2) drivers.
func cgroupPeakFiles(id string) []string {
	return []string{
		"/sys/fs/cgroup/memory/docker/" + id + "/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.peak",
		"/sys/fs/cgroup/docker/" + id + "/memory.peak",
	}
}

// pollCgroupPeak reads the peak counter until the cgroup goes away (the
// container stopped) or ctx ends.
func pollCgroupPeak(ctx context.Context, id string, peak *atomic.Uint64) {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	seen := false
	for i := 0; ; i++ {
		found := false
		for _, f := range cgroupPeakFiles(id) {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			found = true
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && v > peak.Load() {
				peak.Store(v)
			}
		}
		seen = seen || found
		// Stop once the cgroup is gone, or if it never appears (another
		// layout, or a remote daemon behind a unix socket).
		if (seen && !found) || (!seen && i > 400) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func followStats(body io.ReadCloser, peak *atomic.Uint64) {
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var s container.StatsResponse
		if err := dec.Decode(&s); err != nil {
			return // EOF when the container stops, or ctx ended
		}
		for _, v := range []uint64{s.MemoryStats.MaxUsage, s.MemoryStats.Usage} {
			if v > peak.Load() {
				peak.Store(v)
			}
		}
	}
}

// securityOpt is the plan's security as Docker's options: no_new_privs,
// and the seccomp profile inline (the engine reads it from the option;
// "" keeps the engine's default profile).
func securityOpt(s ContainerSpec) []string {
	out := []string{}
	if s.NoNewPrivileges {
		out = append(out, "no-new-privileges:true")
	}
	if s.Seccomp != "" {
		out = append(out, "seccomp="+s.Seccomp)
	}
	return out
}

// isVolumeName reports whether a mount's source names an engine volume,
// not a host path (absolute on the engine's host: "/..." or, from a
// Windows host, "C:\\...").
func isVolumeName(source string) bool {
	return source != "" && !strings.HasPrefix(source, "/") && filepath.VolumeName(source) == "" && !strings.HasPrefix(source, `\\`)
}
