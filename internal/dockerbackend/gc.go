package dockerbackend

import (
	"context"
	"fmt"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// NewGC is gc on the engine e: every container, then every network and
// volume, labelled mcpsidecar=1 that the selection picks
// (orchestrate.Sweep). Its document is orchestrate.Collected.
func NewGC(e dockerx.Engine) sandbox.GC { return engineGC{e: e} }

type engineGC struct{ e dockerx.Engine }

func (g engineGC) Collect(ctx context.Context, sel orchestrate.Selection) (sandbox.Collected, error) {
	got, err := orchestrate.Sweep(ctx, g.e, sel)
	c := sandbox.Collected{Doc: got,
		Summary: fmt.Sprintf("gc: removed %d container(s), %d network(s) and %d volume(s)", len(got.Containers), len(got.Networks), len(got.Volumes))}
	for _, r := range got.Containers {
		c.Removed = append(c.Removed, fmt.Sprintf("removed container %s (run %s)", r.Name, r.Labels[orchestrate.LabelRun]))
	}
	for _, r := range got.Networks {
		c.Removed = append(c.Removed, fmt.Sprintf("removed network %s (run %s)", r.Name, r.Labels[orchestrate.LabelRun]))
	}
	for _, r := range got.Volumes {
		c.Removed = append(c.Removed, fmt.Sprintf("removed volume %s (run %s)", r.Name, r.Labels[orchestrate.LabelRun]))
	}
	if !sel.Kept {
		c.Kept = func(ctx context.Context) string { return g.keptNote(ctx, sel) }
	}
	return c, err
}

// keptNote tells how many runs kept with --keep gc left on the engine,
// and how to remove them; "" for none, or when they cannot be listed.
func (g engineGC) keptNote(ctx context.Context, sel orchestrate.Selection) string {
	cs, err := g.e.ListContainers(ctx, map[string]string{orchestrate.LabelKept: "1"})
	if err != nil {
		return ""
	}
	sel.Kept = true
	runsKept := map[string]bool{}
	for _, c := range cs {
		if c.Labels[orchestrate.LabelKept] == "1" && sel.Picks(c) {
			runsKept[c.Labels[orchestrate.LabelRun]] = true
		}
	}
	if len(runsKept) == 0 {
		return ""
	}
	return fmt.Sprintf("gc: left %d run(s) kept with --keep; remove them with: mcpsidecar gc --kept (or one: mcpsidecar runs rm RUN)", len(runsKept))
}
