package dockerbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// helperTimeout bounds one helper: an exec in the output holder, or a
// short-lived helper container from create to removal.
const helperTimeout = 30 * time.Second

// dropRouteByHelper removes the default route an old engine gives a held
// container on an internal network, through the engine alone: a helper
// container of our image that joins only that container's network
// namespace (container:<id>), with CAP_NET_ADMIN and nothing else, runs
// the route removal and exits. No namespace of this host is entered,
// whatever the engine's process ids name here. A helper that fails
// leaves the route, recorded as a degradation, as the host path does.
func (b *backend) dropRouteByHelper(ctx context.Context, c *orchestrate.Container) error {
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	role := c.Step.Role
	hs := b.helperSpec(c, "route", []string{inside.DropRouteCommand})
	hs.User, hs.CapAdd = "0:0", []string{"NET_ADMIN"}
	hs.Networks = []dockerx.Attachment{{Network: "container:" + c.ID}}
	_, err := b.runHelper(ctx, hs)
	if err != nil {
		d := fmt.Sprintf("%s keeps the default route of its internal network: the route helper failed: %v", role, err)
		b.r.Degrade(d)
	}
	return nil
}

// runHelper creates, starts and waits for a helper container, and removes
// it on every path; it returns the helper's stdout. A non-zero exit is an
// error with the end of its output.
func (b *backend) runHelper(ctx context.Context, hs dockerx.ContainerSpec) ([]byte, error) {
	h, err := b.startHelper(ctx, hs)
	if err != nil {
		return nil, err
	}
	return h.finish(ctx)
}

// helper is a started helper container.
type helper struct {
	b      *backend
	name   string
	id     string
	waited <-chan dockerx.WaitResult
}

// startHelper creates and starts a helper container; on failure nothing
// is left.
func (b *backend) startHelper(ctx context.Context, hs dockerx.ContainerSpec) (*helper, error) {
	id, err := b.r.Engine().CreateContainer(ctx, hs)
	if err != nil {
		return nil, fmt.Errorf("creating helper %s: %w", hs.Name, err)
	}
	h := &helper{b: b, name: hs.Name, id: id, waited: b.r.Engine().WaitContainer(ctx, id)}
	if err := b.r.Engine().StartContainer(ctx, id); err != nil {
		h.remove(ctx)
		return nil, fmt.Errorf("starting helper %s: %w", hs.Name, err)
	}
	return h, nil
}

func (h *helper) remove(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), helperTimeout)
	defer cancel()
	if err := h.b.r.Engine().RemoveContainer(rctx, h.id); err != nil {
		h.b.r.Warn("helper %s left behind (mcpsidecar gc removes it): %v", h.name, err)
	}
}

// finish waits for the helper's end, reads its output and removes it.
func (h *helper) finish(ctx context.Context) ([]byte, error) {
	defer h.remove(ctx)
	var res dockerx.WaitResult
	select {
	case res = <-h.waited:
	case <-ctx.Done():
		return nil, fmt.Errorf("helper %s: %w", h.name, ctx.Err())
	}
	if res.Err != nil {
		return nil, fmt.Errorf("waiting for helper %s: %w", h.name, res.Err)
	}
	var out, errb sandbox.Capture
	if err := h.b.r.Engine().Logs(ctx, h.id, &out, &errb); err != nil {
		return nil, fmt.Errorf("reading helper %s's output: %w", h.name, err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("helper %s exited with code %d%s: %s", h.name, res.ExitCode, h.killedWhy(ctx, res.ExitCode), strings.TrimSpace(lastLines(string(errb.Bytes()), 3)))
	}
	return out.Bytes(), nil
}

// helperMemory bounds a helper.
const helperMemory = 32 << 20

// killedWhy says why a helper that exited 128+9 was killed: out of
// memory, or its pid namespace ended (the role it joined exited first).
func (h *helper) killedWhy(ctx context.Context, code int) string {
	if code != 128+9 {
		return ""
	}
	st, err := h.b.r.Engine().InspectContainer(ctx, h.id)
	switch {
	case err != nil:
		return ""
	case st.OOMKilled:
		return fmt.Sprintf(" (killed: out of memory at its %d MiB limit)", helperMemory>>20)
	}
	return " (killed: the namespace it shared ended, the role exited first)"
}

// helperSpec is a helper container of our image: no network of its own,
// no capability but add, read-only, the role's seccomp profile and
// no-new-privileges, small limits; it carries c's labels (gc finds it)
// under the role kind.
func (b *backend) helperSpec(c *orchestrate.Container, kind string, cmd []string) dockerx.ContainerSpec {
	labels := maps.Clone(c.Step.Spec.Labels)
	labels[orchestrate.LabelRole] = c.Step.Role + "-" + kind
	return dockerx.ContainerSpec{
		Name: c.Step.Spec.Name + "-" + kind, Image: b.r.ImageTag(), Cmd: cmd,
		User: spec.User, Labels: labels, Networks: []dockerx.Attachment{{Network: "none"}},
		ReadOnlyRootfs: true, CapDrop: []string{"ALL"}, CapAdd: []string{},
		NoNewPrivileges: c.Step.Spec.NoNewPrivileges, Seccomp: c.Step.Spec.Seccomp, PidsLimit: 8, MemoryBytes: helperMemory, MemorySwapBytes: helperMemory,
		DNS: []string{}, DNSOptions: []string{}, ExtraHosts: []string{}, StopTimeout: time.Second,
	}
}

// startObserving reads a role's process from outside through the engine
// alone: a helper that shares only the role container's pid namespace
// (observe-role) waits for the role's own hardening and prints the
// kernel's status of its process. A role the helper could not read is
// not observed, and that fails its check (Unproven): it was not looked
// at. held: the role waits, hardened, for its release, and
// startObserving returns once the helper has answered and the answer is
// recorded; otherwise it returns once the helper runs, and the answer is
// recorded when it ends. The caller has claimed the role (observer.claim).
func (b *backend) startObserving(ctx context.Context, c *orchestrate.Container, held bool) {
	role := c.Step.Role
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), helperTimeout)
	hs := b.helperSpec(c, "observe", []string{inside.ObserveCommand, "--timeout", "20s"})
	hs.PidMode = "container:" + c.ID
	h, err := b.startHelper(ctx, hs)
	finish := func() {
		defer cancel()
		var out []byte
		if err == nil {
			out, err = h.finish(ctx)
		}
		b.obs.record(role, helperObservation(out, err))
	}
	if held {
		finish()
		return
	}
	b.obs.wg.Add(1)
	go func() {
		defer b.obs.wg.Done()
		finish()
	}()
}

// helperObservation is what an observe-role helper's answer says.
func helperObservation(out []byte, err error) runs.Observation {
	if err != nil {
		why := "the observing helper could not read the role's process: " + err.Error()
		return runs.Observation{Detail: "not observed: " + why, Unproven: why}
	}
	var st dockerx.ProcStatus
	if err := json.Unmarshal(bytes.TrimSpace(out), &st); err != nil {
		why := fmt.Sprintf("the observing helper's answer %q is not a process status: %v", lastLines(string(out), 1), err)
		return runs.Observation{Detail: "not observed: " + why, Unproven: why}
	}
	return runs.Observation{Seen: true, Seccomp: st.Seccomp, SeccompFilters: st.SeccompFilters,
		NoNewPrivs: st.NoNewPrivs, CapEff: fmt.Sprintf("%016x", st.CapEff), UID: st.UID}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// awaitReadyByHelper is the Session's readiness through the engine alone:
// a helper that joins only the service's network namespace asks the
// service's own loopback (await-ready) until it answers, and exits 0.
func (b *backend) awaitReadyByHelper(ctx context.Context, c *orchestrate.Container, timeout time.Duration) error {
	r := c.Step.Ready
	cmd := []string{inside.ReadyCommand, "--port", strconv.Itoa(r.Port), "--timeout", timeout.String()}
	if r.TCP {
		cmd = append(cmd, "--tcp")
	} else {
		cmd = append(cmd, "--path", r.Path)
	}
	hs := b.helperSpec(c, "ready", cmd)
	hs.Networks = []dockerx.Attachment{{Network: "container:" + c.ID}}
	ctx, cancel := context.WithTimeout(ctx, timeout+helperTimeout)
	defer cancel()
	_, err := b.runHelper(ctx, hs)
	return err
}

// bridgeCheckByHelper is the bridge check on an engine that is not on
// this host: a helper attached to the internal network tries the
// network's gateway address; no host may answer for it.
func (b *backend) bridgeCheckByHelper(n orchestrate.CreatedNetwork) runs.Check {
	c := runs.Check{Name: "engine's host has no address on " + n.Name}
	var gw string
	for _, p := range b.r.Session().Plan.Networks {
		if p.Name == n.Name {
			gw = p.Gateway
		}
	}
	if gw == "" || len(b.r.Session().Containers) == 0 {
		c.Detail = "not established: the network has no planned gateway address to try"
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	hs := b.helperSpec(b.r.Session().Containers[0], "bridge", []string{inside.ProbeGatewayCommand, "--addr", net.JoinHostPort(gw, "9")})
	hs.Networks = []dockerx.Attachment{{Network: n.Name}}
	out, err := b.runHelper(ctx, hs)
	switch got := strings.TrimSpace(string(out)); {
	case err != nil:
		c.Detail = "not established: " + err.Error()
	case got == inside.GatewayUnheld:
		c.OK, c.Detail = true, "no host answers for the gateway address "+gw+" (seen from a helper on the network)"
	default:
		c.Detail = fmt.Sprintf("a host answers for the gateway address %s (%s): a workload could reach the engine's host there", gw, got)
	}
	return c
}
