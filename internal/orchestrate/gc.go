package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// LabelKept marks the resources of a run started with --keep: the user
// asked to keep them, so only an explicit request (gc --kept, runs rm)
// removes them, never the automatic gc at the start of the next run.
const LabelKept = "mcpsidecar.kept"

// Selection says which leftover resources [Sweep] removes. Only resources
// of this host whose owning harness process is gone are ever chosen:
// resources of a live run, of another host, or with unreadable labels are
// left alone, since this process cannot tell whether their owner still
// runs.
type Selection struct {
	Host  string
	Alive func(pid int) bool
	// Kept also selects resources a --keep run left on purpose.
	Kept bool
	// Run, when set, selects only that run's resources, kept ones
	// included.
	Run string
}

// Picks reports whether r is selected.
func (s Selection) Picks(r dockerx.Resource) bool {
	if r.Labels[LabelApp] != "1" || r.Labels[LabelHost] != s.Host {
		return false
	}
	if s.Run != "" && r.Labels[LabelRun] != s.Run {
		return false
	}
	if r.Labels[LabelKept] == "1" && !s.Kept && s.Run == "" {
		return false
	}
	pid, err := strconv.Atoi(r.Labels[LabelPID])
	return err == nil && pid > 0 && !s.Alive(pid)
}

// Orphans picks the resources whose owning harness process is gone: they
// carry this host's name and a pid that alive reports dead. Kept
// resources are not orphans.
func Orphans(rs []dockerx.Resource, host string, alive func(pid int) bool) []dockerx.Resource {
	return Selection{Host: host, Alive: alive}.filter(rs)
}

func (s Selection) filter(rs []dockerx.Resource) []dockerx.Resource {
	var out []dockerx.Resource
	for _, r := range rs {
		if s.Picks(r) {
			out = append(out, r)
		}
	}
	return out
}

// Collected is what a garbage collection removed.
type Collected struct {
	Containers []dockerx.Resource `json:"containers"`
	Networks   []dockerx.Resource `json:"networks"`
	// Volumes are output volumes (runs whose output went through the
	// engine); removed after the containers that used them.
	Volumes []dockerx.Resource `json:"volumes"`
}

// GC removes containers, then networks, left by dead harness processes,
// except what --keep runs kept.
func GC(ctx context.Context, e dockerx.Engine, host string, alive func(int) bool) (Collected, error) {
	return Sweep(ctx, e, Selection{Host: host, Alive: alive})
}

// Sweep removes the selected containers, then the selected networks and
// volumes. It
// goes on past errors and returns them joined.
func Sweep(ctx context.Context, e dockerx.Engine, sel Selection) (Collected, error) {
	got := Collected{Containers: []dockerx.Resource{}, Networks: []dockerx.Resource{}, Volumes: []dockerx.Resource{}}
	match := map[string]string{LabelApp: "1"}
	cs, err := e.ListContainers(ctx, match)
	if err != nil {
		return got, fmt.Errorf("listing containers: %w", err)
	}
	var errs []error
	for _, c := range sel.filter(cs) {
		if err := e.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		got.Containers = append(got.Containers, c)
	}
	ns, err := e.ListNetworks(ctx, match)
	if err != nil {
		return got, errors.Join(append(errs, fmt.Errorf("listing networks: %w", err))...)
	}
	for _, n := range sel.filter(ns) {
		if err := e.RemoveNetwork(ctx, n.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		got.Networks = append(got.Networks, n)
	}
	vs, err := e.ListVolumes(ctx, match)
	if err != nil {
		return got, errors.Join(append(errs, fmt.Errorf("listing volumes: %w", err))...)
	}
	for _, v := range sel.filter(vs) {
		if err := e.RemoveVolume(ctx, v.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		got.Volumes = append(got.Volumes, v)
	}
	return got, errors.Join(errs...)
}

// LiveOwner returns the pid of a live harness process of this host that
// owns one of rs's resources of run, or 0: such a run is still going.
func LiveOwner(rs []dockerx.Resource, host, run string, alive func(int) bool) int {
	for _, r := range rs {
		if r.Labels[LabelApp] != "1" || r.Labels[LabelHost] != host || r.Labels[LabelRun] != run {
			continue
		}
		if pid, err := strconv.Atoi(r.Labels[LabelPID]); err == nil && pid > 0 && alive(pid) {
			return pid
		}
	}
	return 0
}
