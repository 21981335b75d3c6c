package orchestrate

import (
	"context"
	"errors"
	"strconv"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// Orphans picks the resources whose owning harness process is gone: they
// carry this host's name and a pid that alive reports dead. Resources owned
// by another host, or with unreadable labels, are left alone: this process
// cannot tell whether their owner still runs.
func Orphans(rs []dockerx.Resource, host string, alive func(pid int) bool) []dockerx.Resource {
	var out []dockerx.Resource
	for _, r := range rs {
		if r.Labels[LabelApp] != "1" || r.Labels[LabelHost] != host {
			continue
		}
		pid, err := strconv.Atoi(r.Labels[LabelPID])
		if err != nil || pid <= 0 {
			continue
		}
		if !alive(pid) {
			out = append(out, r)
		}
	}
	return out
}

// Collected is what a garbage collection removed.
type Collected struct {
	Containers []dockerx.Resource `json:"containers"`
	Networks   []dockerx.Resource `json:"networks"`
}

// GC removes containers, then networks, left by dead harness processes.
func GC(ctx context.Context, e dockerx.Engine, host string, alive func(int) bool) (Collected, error) {
	var got Collected
	sel := map[string]string{LabelApp: "1"}
	cs, err := e.ListContainers(ctx, sel)
	if err != nil {
		return got, err
	}
	var errs []error
	for _, c := range Orphans(cs, host, alive) {
		if err := e.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		got.Containers = append(got.Containers, c)
	}
	ns, err := e.ListNetworks(ctx, sel)
	if err != nil {
		return got, errors.Join(append(errs, err)...)
	}
	for _, n := range Orphans(ns, host, alive) {
		if err := e.RemoveNetwork(ctx, n.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		got.Networks = append(got.Networks, n)
	}
	return got, errors.Join(errs...)
}
