package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/otelexport"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// makeRunDir creates the run directory, writes what the host knows before
// anything starts, creates each role's output directory and plans the run.
func (j *job) makeRunDir(ctx context.Context) error {
	dir, err := runs.Create(j.o.RunsDir, time.Now())
	if err != nil {
		return err
	}
	j.dir = dir
	if err := j.writeHostArtifacts(); err != nil {
		return err
	}
	j.writeMetadata()
	in, err := j.planInput()
	if err != nil {
		return err
	}
	if err := j.backend.Input(j.run, &in); err != nil {
		return err
	}
	if j.o.PlanInput != nil {
		if err := j.o.PlanInput(&in); err != nil {
			return err
		}
	}
	j.observeAll = in.HoldAll                  // every held role is read from outside (observeHeld)
	if j.mcp, err = mcpPlan(&in); err != nil { // mcp.go
		return err
	}
	plan, err := orchestrate.NewPlan(in)
	if err != nil {
		return err
	}
	if j.o.Plan != nil {
		if err := j.o.Plan(&plan); err != nil {
			return err
		}
	}
	if err := j.applyOwn(ctx, &plan); err != nil { // workload.go
		return err
	}
	if orchestrate.SidecarOffline(in.Workload) {
		j.meta.Degradations = append(j.meta.Degradations, orchestrate.NoteSidecarOffline)
	}
	for _, st := range plan.Containers {
		uid, gid := outputOwner(st)
		if _, err := dir.MkdirOutput(st.Role, uid, gid); err != nil {
			return err
		}
	}
	// From here on the backend may have made something: teardown runs.
	j.outputsStarted = true
	if err := j.backend.Outputs(ctx, j.run, &plan); err != nil {
		return err
	}
	j.sess = orchestrate.NewSession(j.engine, plan)
	j.startWatch(ctx)
	return nil
}

// startWatch starts Options.Watch, if any, on the run directory.
func (j *job) startWatch(ctx context.Context) {
	if j.o.Watch == nil {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	j.watchStop, j.watchDone = cancel, make(chan struct{})
	go func() {
		defer close(j.watchDone)
		j.o.Watch(wctx, j.dir.Path, j.redact) // the run's secrets are all known by now (planInput)
	}()
}

// stopWatch ends Options.Watch and waits for it.
func (j *job) stopWatch() {
	if j.watchStop == nil {
		return
	}
	j.watchStop()
	<-j.watchDone
	j.watchStop = nil
}

// writeHostArtifacts writes the spec, what it resolved into, and the image's
// Dockerfile. No secret is in any of them: the profile holds variable names
// only.
func (j *job) writeHostArtifacts() error {
	p := j.profile
	sandboxSpec := map[string]any{"spec": p.Spec, "source": p.Spec.Source, "image_name": j.image.Tag,
		"test_sandbox": j.o.Workload == orchestrate.WorkloadProbe}
	files := []struct {
		name string
		data any
	}{
		{runs.FileSandboxSpec, sandboxSpec},
		{runs.FileResolvedProfile, p},
		{runs.FileLandlockPolicy, j.landlockDoc()},
		{runs.FileProbeConfig, j.probeContext()},
	}
	if err := j.writeArtifact(runs.FileDockerfile, j.image.Dockerfile); err != nil {
		return err
	}
	if err := j.writeArtifact(runs.FileSeccompProfile, p.SeccompProfile); err != nil {
		return err
	}
	if p.SquidConf != "" {
		if err := j.writeArtifact(runs.FileSquidConf, []byte(p.SquidConf)); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := j.writeJSON(f.name, f.data); err != nil {
			return err
		}
	}
	return nil
}

// planInput gathers the run-time inputs of the plan: forwarded host
// variables (forwardEnv says which are secret), the credentials (held by
// the gateway, the agent getting a per-run placeholder), the question, the
// probe context, labels and owner.
func (j *job) planInput() (orchestrate.Input, error) {
	host, _ := os.Hostname()
	agentEnv, secrets := forwardEnv(j.agentContainer().ForwardEnv, j.getenv)
	j.secrets = append(j.secrets, secrets...)
	creds, err := orchestrate.Credentials(j.profile, j.o.GatewayEngine, j.getenv, orchestrate.NewPlaceholder())
	if err != nil {
		return orchestrate.Input{}, err
	}
	j.secrets = append(j.secrets, creds.Secrets...)
	for _, d := range creds.Degradations {
		j.meta.Degradations = append(j.meta.Degradations, d)
		fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	}
	agentEnv = append(agentEnv, creds.Agent...)
	if v := j.meta.Engine.Version; v != "" {
		// agent --check judges a default route by the engine's version.
		agentEnv = append(agentEnv, dockerx.EnvVar{Name: agent.EnvEngineVersion, Value: v})
	}
	if j.o.Question != "" {
		agentEnv = append(agentEnv, dockerx.EnvVar{Name: orchestrate.EnvQuestion, Value: j.o.Question})
	}
	if j.o.Workload == orchestrate.WorkloadProbe {
		ctxJSON, err := json.Marshal(j.probeContext())
		if err != nil {
			return orchestrate.Input{}, fmt.Errorf("encoding the probe context: %w", err)
		}
		agentEnv = append(agentEnv, dockerx.EnvVar{Name: probe.ContextEnv, Value: string(ctxJSON)})
	}
	pool := j.o.SubnetPool
	j.holdToken = holdToken()
	return orchestrate.Input{
		SubnetPool: pool, Profile: j.profile, RunID: j.dir.ID, RunDir: j.dir.Path, Image: j.image.Tag, Workload: j.o.Workload,
		Env:   map[string][]dockerx.EnvVar{orchestrate.RoleAgent: agentEnv, orchestrate.RoleGateway: creds.Gateway},
		Owner: orchestrate.Owner{PID: os.Getpid(), Host: host}, ExtraLabels: j.labels, Keep: j.o.Keep,
		WorkloadArgs: j.workloadArgs(), CmdOverride: j.cmdOverride(), Token: token(), HoldToken: j.holdToken,
		TraceParent: otelexport.RunTraceParent(j.dir.ID), DropRoutes: j.oldEngine(), GatewayEngine: j.o.GatewayEngine, SquidImage: j.o.SquidImage,
	}, nil
}

func (j *job) agentContainer() spec.Container {
	return j.profile.Containers[spec.RoleAgent]
}

// phaseDone records what each phase of the plan left and words its error
// (orchestrate.Hooks.Done, through Job.PhaseDone): the networks, a
// role's start (the workload's, or a service's start results), the
// workload's end.
func (j *job) phaseDone(ctx context.Context, phase string, err error) error {
	switch phase {
	case orchestrate.PhaseNetworks:
		j.recordContainers()
		return addressHint(err)
	case orchestrate.PhaseWait:
		return j.workloadExited(err)
	}
	if st, ok := j.sess.Step(phase); ok && st.Workload {
		j.running = j.sess.Workload
		return err
	}
	return j.serviceStarted(ctx, phase, err)
}

// addressHint turns running out of addresses into exit 5 with a hint: the
// run's pool is full, or (networks without a subnet) the engine's default
// pools are.
func addressHint(err error) error {
	switch {
	case errors.Is(err, orchestrate.ErrSubnetPoolExhausted):
		return exitcode.WithHint(exitcode.Unavailable, err, "remove networks left by dead runs (mcpsidecar gc), or give the runs a larger "+
			"or another private range with --subnet-pool or "+EnvSubnetPool+" (default "+orchestrate.DefaultSubnetPool+")")
	case errors.Is(err, dockerx.ErrNoAddressPool):
		return exitcode.WithHint(exitcode.Unavailable, err, "the engine's default address pools are used up: remove unused networks "+
			"(docker network prune, mcpsidecar gc), or widen the daemon's default-address-pools")
	}
	return err
}

// serviceStarted records a service's start (the gateway, the sidecar) in
// <role>-start-results.json, whether it became ready or not.
func (j *job) serviceStarted(ctx context.Context, role string, err error) error {
	action := "create, start, GET /healthz on the container's own loopback until 200"
	if st, _ := j.sess.Step(role); st.Ready != nil && st.Ready.TCP {
		action = "create, start, TCP connect to the container's own loopback until accepted"
	}
	res := StartResult{Role: role, Action: action, OK: err == nil,
		DurationMS: float64(time.Since(j.phases.started).Microseconds()) / 1000}
	if c := j.sess.Find(role); c != nil {
		res.Container, res.ID, res.IPs = c.Step.Spec.Name, c.ID, c.IPs
		if c.ReadyBy != "" {
			res.Action = "create, start, wait for a " + c.ReadyBy
		}
		if c.StartedAhead { // orchestrate.Session.Apply
			res.Action = strings.Replace(res.Action, "create, start, ",
				"create and start (held) while the services before it became ready, release once they were, ", 1)
		}
	}
	if err != nil {
		res.Error = err.Error()
		err = fmt.Errorf("starting the %s: %w%s", role, err, j.logTail(ctx, role))
	}
	if werr := j.writeJSON(runs.StartResultsFile(role), []StartResult{res}); werr != nil && err == nil {
		err = werr
	}
	return err
}

// StartResult is one line of gateway-start-results.json or
// mcp-sidecar-start-results.json.
type StartResult struct {
	Role       string            `json:"role"`
	Action     string            `json:"action"`
	Container  string            `json:"container"`
	ID         string            `json:"id"`
	IPs        map[string]string `json:"ip_addresses"`
	OK         bool              `json:"ok"`
	Error      string            `json:"error,omitempty"`
	DurationMS float64           `json:"duration_ms"`
}

// logTail returns the last lines a failed container printed, so the
// error says why it did not start.
func (j *job) logTail(ctx context.Context, role string) string {
	var out, errb Capture
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c := j.sess.Find(role)
	if c == nil || j.backend.Logs(lctx, j.run, c, &out, &errb) != nil {
		return ""
	}
	b := j.redact(append(out.Bytes(), errb.Bytes()...))
	if len(b) > 800 {
		b = b[len(b)-800:]
	}
	if len(b) == 0 {
		return ""
	}
	return "\n" + role + " output:\n" + string(b)
}

// workloadExited records the workload's exit code and says when it was
// not 0.
func (j *job) workloadExited(err error) error {
	c := j.sess.Find(orchestrate.RoleAgent)
	if c != nil && c.ExitCode != nil {
		j.agentExit = c.ExitCode
	}
	if err == nil && c != nil && c.ExitCode != nil && *c.ExitCode != 0 {
		fmt.Fprintf(j.s.Err, "the workload exited with code %d\n", *c.ExitCode)
	}
	return err
}

func (j *job) workloadArgs() []string {
	if j.o.Workload == orchestrate.WorkloadProbe && j.o.SerializeEvidence {
		return []string{"--serialize-evidence"}
	}
	return nil
}

func (j *job) cmdOverride() map[string][]string {
	o := map[string][]string{}
	if j.o.WorkloadCmd != nil {
		o[orchestrate.RoleAgent] = j.o.WorkloadCmd
	}
	if j.o.GatewayCmd != nil {
		o[orchestrate.RoleGateway] = j.o.GatewayCmd
	}
	return o
}

// holdToken is a run's release token (hold.TokenEnv): 128 random bits,
// which no image can know when it is built.
func holdToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// token is a short random suffix for Docker names (see orchestrate.Input).
func token() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
