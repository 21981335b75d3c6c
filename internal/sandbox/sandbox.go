package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/enginever"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hostca"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/rolebin"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// minEngineMajor is the oldest Docker Engine that keeps containers on
// --internal networks from resolving external names (internal/enginever).
const minEngineMajor = enginever.Min

// teardownTimeout bounds removing a run's containers and networks. With 32
// runs ending together on two cores, Engine 20.10 took over two minutes to
// remove some networks (each removal rewrites iptables under one lock).
const teardownTimeout = 5 * time.Minute

// maxCapture bounds the workload output kept for stdout.txt/stderr.txt.
const maxCapture = 16 << 20

// Environment variables the lifecycle reads on the host (through
// [Options].Getenv).
const (
	EnvAllowOldEngine = "MCPSIDECAR_ALLOW_OLD_ENGINE" // "1": accept an engine older than 26 (read by cli for the flag's default)
	EnvImageBinary    = "MCPSIDECAR_IMAGE_BINARY"     // the binary to put in the image (default: this one)
	EnvCABundle       = agent.EnvCABundle             // default: this host's store (hostca.System)
	EnvImageMethod    = "MCPSIDECAR_IMAGE_METHOD"     // "import": skip the classic builder
	EnvExtraLabels    = "MCPSIDECAR_LABELS"           // "k=v,k=v" added to every resource (tests)
	EnvSubnetPool     = "MCPSIDECAR_SUBNET_POOL"      // the private IPv4 range the runs' networks come from (read by cli)
)

// Options say what one lifecycle (run, doctor or test-sandbox) does. cli
// fills them from flags and checks them before [Run]; the zero value of
// every optional field is the ordinary behaviour.
type Options struct {
	Command  string               // "run", "doctor", "test-sandbox": recorded in run-metadata.json
	Workload orchestrate.Workload // what the agent-role container runs
	// Spec is the sandbox spec, read by the caller (specinput.go); the
	// "spec" phase reports and resolves it.
	Spec         SpecInput
	RunsDir      string        // the directory that holds the run directories
	Timeout      time.Duration // the workload is killed after this long
	ReadyTimeout time.Duration // how long the gateway and sidecar may take to become ready
	Keep         bool          // leave containers and networks (servers up) after the run
	Quiet        bool          // no progress lines (warnings are still printed)
	Question     string        // the agent's question (run only); "" is the seed's
	// AllowOldEngine accepts an engine older than 26, recorded as a
	// degradation.
	AllowOldEngine bool
	GatewayEngine  string       // orchestrate.EngineOurs or EngineSquid
	SquidImage     string       // the Squid image for EngineSquid; never pulled
	SubnetPool     netip.Prefix // where the run's networks come from (orchestrate.ParseSubnetPool)
	// SerializeEvidence keeps each probe's raw evidence in report.json
	// (test-sandbox).
	SerializeEvidence bool
	// WorkloadCmd and GatewayCmd replace the agent-role or gateway
	// container's command (tests only).
	WorkloadCmd, GatewayCmd []string
	// Getenv reads the host's environment; nil is os.Getenv.
	Getenv func(string) string
	// Own is a user's workload image and command (run --image,
	// test-sandbox --image; workload.go); nil and no [workload] in the
	// spec: our agent.
	Own *OwnWorkload
	// Backend is where the plan's containers run (internal/dockerbackend,
	// internal/kube/backend), one per run; required. cli chooses it;
	// nothing below asks which one it is (backend.go).
	Backend Backend

	// Hooks, each optional. They let a feature join the lifecycle without
	// a phase of its own; doc.go says where each one is called.

	// PlanInput may change the plan's input after the lifecycle has
	// gathered it and before the plan is built: add environment for a
	// role (in.Env), another image or command for the agent-role
	// container (in.CmdOverride, in.Image), labels. An error fails the
	// run-dir phase.
	PlanInput func(in *orchestrate.Input) error
	// Plan may change the plan once it is built and before anything is
	// created: a container's Docker options (plan.Containers[i].Spec:
	// image, command, user, mounts, environment). Its output directory is
	// made after this hook, with the owner of the step's Spec.User.
	Plan func(p *orchestrate.Plan) error
	// Watch, when set, runs in its own goroutine from the moment the run
	// directory and the plan exist until the workload has ended (before
	// collect): ctx is cancelled then, and Run waits for Watch to return.
	// It may read the run directory (runDir) to print progress; it must
	// not write there. redact removes every secret value the run holds
	// (forwarded variables, credentials) from what it reads, as collect
	// does for the record: anything it passes on must go through it.
	Watch func(ctx context.Context, runDir string, redact Redactor)
	// OnPhase is called after each phase with its record (the same one
	// run-metadata.json gets).
	OnPhase func(runs.Phase)
	// Checks, when set, adds host-side checks to the verdict once the
	// artifacts are collected (runDir holds them).
	Checks func(runDir string, m *runs.Metadata) []runs.Check
}

// Output is where a lifecycle writes: the workload's stdout to Out, the
// workload's stderr, progress lines and warnings to Err.
type Output struct {
	Out io.Writer
	Err io.Writer
}

// Result is what a lifecycle left.
type Result struct {
	// RunID and RunDir name the run directory; both are "" when the run
	// failed before it was made (a bad spec, no engine).
	RunID, RunDir string
	// Metadata is what run-metadata.json holds.
	Metadata runs.Metadata
}

// job is one sandbox lifecycle (run, doctor or test-sandbox) in progress.
type job struct {
	s Output
	// roleCopies are the files collect read from the roles' folders,
	// redacted in place after the verdict (collect.go).
	roleCopies []roleFile
	o          Options
	getenv     func(string) string
	started    time.Time
	phases     *phaseLog
	meta       runs.Metadata

	engine  dockerx.Engine
	version dockerx.EngineVersion // what the engine's /version said
	spec    *spec.Spec
	profile *spec.Profile
	image   dockerx.ImageFiles
	// imageBin is the binary the image was built from, read once; a
	// workload's launcher is a private copy of it (launcherCopy).
	imageBin    []byte
	launcherDir string // that copy's directory, removed at the end
	dir         *runs.Dir
	sess        *orchestrate.Session
	labels      map[string]string

	secrets    []string // secret forwarded values, redacted from every artifact (redact.go)
	stdout     Capture
	stderr     Capture
	agentExit  *int
	running    *orchestrate.Running
	observeAll bool               // the backend holds and observes every role (verdict.Record.ObserveAll)
	holdToken  string             // the run's release token (internal/hold)
	outputOver map[string]string  // the roles whose output passed its cap, as the backend found (Job.OutputsOverCap)
	watchStop  context.CancelFunc // ends Options.Watch
	watchDone  chan struct{}
	own        *ownRun    // the user's workload, when one runs (workload.go)
	backend    Backend    // where the plan's containers run (backend.go)
	run        *Job       // the run as the backend sees it
	problemsMu sync.Mutex // ArtifactProblem may be called concurrently
	// outputsStarted: the backend was asked for the output places, so it
	// may have created objects (volumes, a holder) before the session.
	outputsStarted bool
	mcp            *mcpPins // the spec's MCP servers' pins (mcp.go); nil without declared servers
}

// Run carries out one whole lifecycle on engine: every phase in order,
// then artifacts and teardown on every path. The error is the run's own;
// when ctx was cancelled (a signal), the caller says so (cli: exit 130),
// and Result.Metadata.ExitCode is already exitcode.Interrupted. engine is
// used, never closed; [Unavailable] stands for one that could not be
// opened.
func Run(ctx context.Context, engine dockerx.Engine, o Options, out Output) (Result, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.Backend == nil {
		return Result{}, errors.New("sandbox: Options.Backend is not set")
	}
	j := &job{s: out, o: o, getenv: getenv, engine: engine, started: time.Now().UTC(), backend: o.Backend}
	j.run = &Job{j: j}
	j.phases = &phaseLog{w: out.Err, quiet: o.Quiet, on: o.OnPhase}
	j.meta = runs.Metadata{Schema: runs.MetadataSchema, Command: o.Command, Started: j.started,
		Networks: []runs.Network{}, Containers: []runs.Container{}, Degradations: []string{}}
	if o.Command == "run" && o.Workload == orchestrate.WorkloadAgent {
		j.meta.Question = cmp.Or(o.Question, agent.DefaultQuestion) // the report shows it
	}
	err := j.execute(ctx)
	err = j.finish(ctx, err)
	res := Result{Metadata: j.meta}
	if j.dir != nil {
		res.RunID, res.RunDir = j.dir.ID, j.dir.Path
	}
	j.mcp.pinFirstRun(res.RunDir, out.Err) // mcp.go
	return res, err
}

// Unavailable is an engine that could not be opened (dockerx.New failed):
// the preflight phase fails with err, exit 5, as it would have opening it.
func Unavailable(err error) dockerx.Engine { return unavailable{err: err} }

type unavailable struct {
	dockerx.Engine // nil: no call reaches it, preflight stops first
	err            error
}

// execute runs the phases up to the workload's exit: the host's own
// (spec, preflight, image, run-dir), then the plan's, in the plan's order
// (orchestrate.Session.Apply: networks, one per container, wait).
func (j *job) execute(ctx context.Context) error {
	steps := []struct {
		name string
		f    func(context.Context) error
	}{
		{"spec", j.loadSpec},
		{"preflight", j.preflight},
		{"image", j.ensureImage},
		{"run-dir", j.makeRunDir},
	}
	for _, st := range steps {
		if err := j.phases.do(st.name, func() error { return st.f(ctx) }); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return j.backend.Apply(ctx, j.run)
}

func (j *job) loadSpec(context.Context) error {
	in := j.o.Spec // cli: --spec, ./sandbox_spec.toml, or built-in
	j.spec = in.Spec
	err := in.Err
	if !j.o.Quiet && in.Name != "" {
		fmt.Fprintf(j.s.Err, "spec: %s\n", in.Name)
	}
	if err == nil && j.spec == nil {
		err = errors.New("no sandbox spec given (Options.Spec)")
	}
	if err == nil {
		j.profile, err = spec.Resolve(j.spec)
	}
	if err != nil {
		return exitcode.With(exitcode.InvalidSpec, err)
	}
	return nil
}

func (j *job) preflight(ctx context.Context) error {
	if u, ok := j.engine.(unavailable); ok {
		return exitcode.WithHint(exitcode.Unavailable, u.err, "set DOCKER_HOST or start the Docker daemon")
	}
	v, err := j.engine.Version(ctx)
	if err != nil {
		return exitcode.WithHint(exitcode.Unavailable, err, "is the Docker daemon running and is its socket readable by you? (DOCKER_HOST)")
	}
	j.meta.Engine = runs.Engine{Version: v.Version, APIVersion: v.APIVersion}
	j.version = v
	if err := j.checkEngine(v); err != nil {
		return err
	}
	if err := j.checkHost(); err != nil {
		return err
	}
	if j.labels, err = extraLabels(j.getenv(EnvExtraLabels)); err != nil {
		return err
	}
	if err := j.backend.Preflight(ctx, j.run); err != nil {
		return err
	}
	j.gc(ctx)
	return nil
}

// checkEngine refuses engines older than 26 unless the user accepts the
// degradation explicitly; the plan's DNS isolation still applies.
func (j *job) checkEngine(v dockerx.EngineVersion) error {
	if v.Podman {
		return exitcode.WithHint(exitcode.Unavailable,
			fmt.Errorf("the engine is Podman %s behind a Docker-compatible API, not Docker Engine: its version says nothing of Docker's, "+
				"and its rootful --internal networks cannot reach its DNS server (aardvark-dns; containers/podman#29175, #22807), "+
				"so the run's internal roles would not find each other", v.Version),
			"run mcpsidecar against a Docker Engine 26 or later (DOCKER_HOST, or a docker context)")
	}
	major, err := enginever.Major(v.Version)
	if err != nil {
		return exitcode.With(exitcode.Unavailable, err)
	}
	if major >= minEngineMajor {
		return nil
	}
	msg := fmt.Sprintf("Docker Engine %s is older than %d: such engines let containers on --internal networks resolve external names, "+
		"and give them a default route (what is sent through it is dropped by Docker's isolation rules)", v.Version, minEngineMajor)
	if !j.o.AllowOldEngine {
		return exitcode.WithHint(exitcode.Unavailable, errors.New(msg),
			"upgrade Docker Engine, or accept the risk with --allow-old-engine ("+EnvAllowOldEngine+"=1)")
	}
	d := msg + "; accepted by --allow-old-engine: internal containers get an unroutable upstream DNS server, " +
		"and are held at start until the harness has removed their default route"
	j.meta.Degradations = append(j.meta.Degradations, d)
	// Printed once and short (every run on such an engine says it); the
	// record keeps the whole text.
	fmt.Fprintf(j.s.Err, "warning: Docker Engine %s is older than %d; accepted by --allow-old-engine, with workarounds (the full text is in run-metadata.json, degradations)\n", v.Version, minEngineMajor)
	return nil
}

// checkHost makes sure the variables the agent needs exist before anything
// is created. Only a real model run needs them.
func (j *job) checkHost() error {
	if j.o.Workload != orchestrate.WorkloadAgent || !j.spec.Has(spec.CapOpenAIAgents) {
		return nil
	}
	if err := verdict.CheckHost(j.profile.Gateway, j.getenv); err != nil {
		hint := "" // only the hint that applies to this failure (issue 13)
		if he := (*verdict.HostError)(nil); errors.As(err, &he) {
			hint = he.Hint
		}
		return exitcode.WithHint(exitcode.Unavailable, err, hint)
	}
	return nil
}

// gc removes what dead runs left, before this run adds its own.
func (j *job) gc(ctx context.Context) {
	host, _ := os.Hostname()
	got, err := orchestrate.GC(ctx, j.engine, host, orchestrate.PIDAlive)
	if n := len(got.Containers) + len(got.Networks) + len(got.Volumes); n > 0 && !j.o.Quiet {
		fmt.Fprintf(j.s.Err, "gc: removed %d container(s), %d network(s) and %d volume(s) left by dead runs\n", len(got.Containers), len(got.Networks), len(got.Volumes))
	}
	if err != nil {
		fmt.Fprintf(j.s.Err, "warning: gc: %v\n", err)
	}
}

func (j *job) ensureImage(ctx context.Context) error {
	if err := j.checkGateway(ctx); err != nil {
		return err
	}
	img, err := j.imageFiles()
	if err != nil {
		return err
	}
	j.image = img
	method, info, err := orchestrate.EnsureImage(ctx, j.engine, img, j.getenv(EnvImageMethod) == orchestrate.MethodImport)
	if err != nil {
		return err
	}
	j.meta.Image = runs.Image{Tag: img.Tag, Built: method != orchestrate.MethodReused, Method: method, SizeBytes: info.Size, Binary: j.meta.Image.Binary}
	if !j.o.Quiet {
		verb := map[string]string{orchestrate.MethodReused: "reused", orchestrate.MethodBuild: "built with the classic builder",
			orchestrate.MethodImport: "imported from a root filesystem (no builder)"}[method]
		fmt.Fprintf(j.s.Err, "image %s %s (%.1f MB)\n", img.Tag, verb, float64(info.Size)/1e6)
	}
	return nil
}

func (j *job) imageFiles() (dockerx.ImageFiles, error) {
	choice, err := j.imageBinary() // workload.go
	if err != nil {
		return dockerx.ImageFiles{}, err
	}
	binPath := choice.Path
	bin := choice.Bytes // a role binary: the bytes its digest was checked on
	if bin == nil {
		if bin, err = os.ReadFile(binPath); err != nil {
			return dockerx.ImageFiles{}, fmt.Errorf("reading the binary for the image: %w", err)
		}
	}
	// Read once: the image and the launcher (workload.go) are these bytes.
	j.imageBin = bin
	j.meta.Image.Binary = &runs.ImageBinary{Kind: choice.Kind, Path: binPath, SizeBytes: int64(len(bin)), SHA256: rolebin.Sum(bin)}
	if err := j.checkImageBinary(bin, binPath); err != nil { // workload.go
		return dockerx.ImageFiles{}, err
	}
	ca, err := hostca.Load(j.getenv(EnvCABundle)) // unset: this host's store (Windows has no CA file)
	if err != nil {
		return dockerx.ImageFiles{}, exitcode.WithHint(exitcode.Unavailable, err, hostca.Hint)
	}
	labels := map[string]string{orchestrate.LabelApp: "image"}
	for k, v := range j.labels {
		labels[k] = v
	}
	img, err := orchestrate.NewImage(orchestrate.ImageSource{Binary: bin, CACerts: ca.PEM}, labels)
	if err != nil {
		return img, exitcode.WithHint(exitcode.Unavailable, err, "build with: make build (CGO_ENABLED=0), or set "+EnvImageBinary)
	}
	return img, nil
}

// Capture keeps the first 16 MiB written to it (a workload's stream, a
// role's logs, a helper's output) and counts the rest, which Bytes
// notes at the end. The zero value is ready; it is safe for concurrent
// writers.
type Capture struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int64
}

func (b *Capture) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := maxCapture - b.buf.Len()
	if room < len(p) {
		if room > 0 {
			b.buf.Write(p[:room])
		}
		b.dropped += int64(len(p) - max(room, 0))
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *Capture) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := bytes.Clone(b.buf.Bytes())
	if b.dropped > 0 {
		out = append(out, fmt.Sprintf("\n[mcpsidecar: %d more bytes not kept]\n", b.dropped)...)
	}
	return out
}

func (j *job) writeArtifact(name string, data []byte) error {
	return j.dir.Write(name, j.redact(data))
}

func (j *job) writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return j.writeArtifact(name, append(b, '\n'))
}

// finish collects artifacts, tears down, writes metadata and the timeline,
// and decides the result. It runs on every path.
func (j *job) finish(ctx context.Context, runErr error) error {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	j.stopWatch()
	if j.sess != nil {
		j.backend.Stop(bg, j.run)
		_ = j.phases.do("collect", func() error { return j.collect(bg) })
	}
	verdictErr := j.verdict(runErr)
	j.redactRoleCopies() // collect.go: after the verdict's search of them
	if j.sess != nil || j.outputsStarted {
		// Teardown gets a budget of its own: on a busy engine (dozens of
		// runs at once) stopping and collecting can use up bg's, and a
		// network removal cut short is a network left behind.
		td, cancelTD := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		_ = j.phases.do("teardown", func() error {
			j.recordContainers()
			return j.backend.Teardown(td, j.run)
		})
		cancelTD()
		if j.sess != nil {
			j.secureRunDir()
		}
	}
	j.removeLauncherCopy() // workload.go
	err := errors.Join(runErr, verdictErr)
	j.meta.ExitCode = exitCodeOf(err)
	if ctx.Err() != nil {
		j.meta.ExitCode = exitcode.Interrupted
	}
	j.writeMetadata()
	if j.dir != nil {
		if terr := timeline.Write(j.dir.Path); terr != nil {
			fmt.Fprintf(j.s.Err, "warning: timeline: %v\n", terr)
		}
		j.dir.Close()
	}
	return err
}

func exitCodeOf(err error) int {
	if err == nil {
		return exitcode.OK
	}
	code, _ := exitcode.Of(err)
	return code
}

// keep records a kept sandbox and tells the user how to remove it with
// removeCommand (sh -c "...").
func (j *job) keep(removeCommand []string) {
	j.meta.Kept = true
	j.meta.RemoveCommand = removeCommand
	fmt.Fprintf(j.s.Err, "kept the sandbox (gc leaves it); remove it with:\n  %s\nor, with its run directory:\n  mcpsidecar runs rm %s --runs-dir %s\n",
		j.meta.RemoveCommand[2], j.dir.ID, filepath.Dir(j.dir.Path))
}

// secureRunDir makes the role folders safe and readable by the user who
// started the run once every container has stopped (runs.Dir.Secure).
func (j *job) secureRunDir() {
	var roles []string
	for _, st := range j.sess.Plan.Containers {
		roles = append(roles, st.Role)
	}
	changed, err := j.dir.Secure(roles, os.Getuid(), os.Getgid())
	j.meta.ArtifactProblems = append(j.meta.ArtifactProblems, changed...)
	if err != nil {
		d := fmt.Sprintf("the run directory could not be fully secured: %v", err)
		j.meta.Degradations = append(j.meta.Degradations, d)
		fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	}
}

func (j *job) writeMetadata() {
	if j.dir == nil {
		return
	}
	j.recordContainers()
	j.meta.RunID = j.dir.ID
	j.meta.Finished = time.Now().UTC()
	j.meta.Phases = j.phases.list
	b, err := json.MarshalIndent(j.meta, "", "  ")
	if err == nil {
		err = j.dir.Replace(runs.MetadataFile, j.redact(append(b, '\n')))
	}
	if err != nil {
		fmt.Fprintf(j.s.Err, "warning: writing %s: %v\n", runs.MetadataFile, err)
	}
}

// recordContainers copies what the session knows into the metadata.
func (j *job) recordContainers() {
	if j.sess == nil {
		return
	}
	j.meta.Networks = j.meta.Networks[:0]
	for _, n := range j.sess.Networks {
		j.meta.Networks = append(j.meta.Networks, runs.Network{Name: n.Name, ID: n.ID, Internal: n.Internal})
	}
	j.meta.Containers = j.meta.Containers[:0]
	for _, c := range j.sess.Containers {
		rc := runs.Container{Role: c.Step.Role, Name: c.Step.Spec.Name, ID: c.ID, ExitCode: c.ExitCode,
			PeakMemoryBytes: c.PeakMemory(), TimedOut: c.TimedOut, Networks: []string{}, Aliases: []string{}}
		for _, a := range c.Step.Spec.Networks {
			rc.Networks = append(rc.Networks, a.Network)
			rc.Aliases = append(rc.Aliases, a.Aliases...)
		}
		j.meta.Containers = append(j.meta.Containers, rc)
	}
}

// phaseLog prints one progress line per phase and records its timing.
type phaseLog struct {
	w     io.Writer
	quiet bool
	on    func(runs.Phase) // Options.OnPhase
	list  []runs.Phase
	// started is when the phase under way began.
	started time.Time
}

func (p *phaseLog) do(name string, f func() error) error {
	start := time.Now()
	p.started = start
	err := f()
	d := time.Since(start)
	ph := runs.Phase{Name: name, Start: start.UTC(), DurationMS: float64(d.Microseconds()) / 1000, OK: err == nil}
	if err != nil {
		ph.Error = firstLine(err.Error())
	}
	p.list = append(p.list, ph)
	if p.on != nil {
		p.on(ph)
	}
	if !p.quiet {
		status := "ok"
		if err != nil {
			status = "FAILED: " + ph.Error
		}
		fmt.Fprintf(p.w, "[%-9s] %8.1f ms  %s\n", name, ph.DurationMS, status)
	}
	return err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// extraLabels parses MCPSIDECAR_LABELS ("k=v,k=v").
func extraLabels(raw string) (map[string]string, error) {
	out := map[string]string{}
	if raw == "" {
		return out, nil
	}
	for _, kv := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, exitcode.Usagef("%s: entry %q: want key=value", EnvExtraLabels, kv)
		}
		out[k] = v
	}
	return out, nil
}
