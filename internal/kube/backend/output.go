package kubebackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	"github.com/mcpsidecar/mcpsidecar/internal/livecopy"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// readOutput reads the files collect needs of a role (runs.RoleFiles
// and the harden report) from its pod's output volume, through the API
// (the holder's read command, kube.Client.ReadOutput), into the role's
// output directory of the run directory. It returns what the pod said
// about the files (a link or a FIFO left out, a file over the cap).
func (b *kubeBackend) readOutput(ctx context.Context, r *sandbox.Job, c *orchestrate.Container) ([]string, error) {
	role := c.Step.Role
	dir, ok := podOutputDir(c.Step)
	if !ok {
		return nil, nil // a role without an output directory has no holder
	}
	dst, err := os.OpenRoot(filepath.Join(r.Dir(), role))
	if err != nil {
		return nil, fmt.Errorf("%s output directory: %w", role, err)
	}
	defer dst.Close()
	names := holder.OutputNames(role)
	pr, pw := io.Pipe()
	type result struct {
		problems, notes []string
		err             error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		res.problems, res.notes, res.err = b.k.Client.ReadOutput(ctx, b.ns, c.ID, dir, names, holder.OutputCap, pw)
		pw.CloseWithError(res.err)
		done <- res
	}()
	written, untarErr := holder.UntarWith(pr, dst, names, holder.OutputCap, livecopy.WriteGrow) // over the live copies, in place
	pr.CloseWithError(errors.New("stopped reading"))                                            // the exec then ends
	res := <-done
	for _, n := range res.notes {
		r.Say("%s output reader: %s", role, n)
	}
	problems := append(res.problems, livecopy.RemoveStale(dst, names, written)...)
	if res.err != nil {
		return problems, res.err
	}
	return problems, untarErr
}

// startLiveCopy copies each role's logs from its pod into the run
// directory while the run goes (internal/livecopy), so progress lines,
// runs tail and the OpenTelemetry live export and relay see the record
// grow as on Docker; stop ends it with a last copy. Stop's final read
// (readOutput) writes over the copies and removes what it did not read.
func (b *kubeBackend) startLiveCopy(ctx context.Context, r *sandbox.Job) (stop func()) {
	ns, dirs, pods := b.ns, map[string]string{}, map[string]string{}
	var roles []string
	for _, c := range r.Session().Containers {
		if dir, ok := podOutputDir(c.Step); ok {
			dirs[c.Step.Role], pods[c.Step.Role] = dir, c.ID
			roles = append(roles, c.Step.Role)
		}
	}
	src := func(ctx context.Context, role string, names []string, w io.Writer) error {
		_, _, err := b.k.Client.ReadOutput(ctx, ns, pods[role], dirs[role], names, holder.OutputCap, w)
		return err
	}
	stopCopy := livecopy.Start(ctx, r.Dir(), roles, src, r.Say)
	return func() { stopCopy(true) }
}

// podOutputDir is the container path of the role's output directory.
func podOutputDir(st orchestrate.Step) (string, bool) {
	for _, m := range st.Spec.Mounts {
		if m.Source == st.OutputDir && !m.ReadOnly {
			return m.Target, true
		}
	}
	return "", false
}
