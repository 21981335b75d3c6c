package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// minEngineMajor is the oldest Docker Engine that keeps containers on
// --internal networks from resolving external names.
const minEngineMajor = 26

// teardownTimeout bounds removing a run's containers and networks. With 32
// runs ending together on two cores, Engine 20.10 took over two minutes to
// remove some networks (each removal rewrites iptables under one lock).
const teardownTimeout = 5 * time.Minute

// maxCapture bounds the workload output kept for stdout.txt/stderr.txt.
const maxCapture = 16 << 20

// job is one sandbox lifecycle (run, doctor or test-sandbox) in progress.
type job struct {
	s       Streams
	o       sandboxOptions
	getenv  func(string) string
	started time.Time
	phases  *phaseLog
	meta    runs.Metadata

	engine  dockerx.Engine
	spec    *spec.Spec
	profile *spec.Profile
	image   dockerx.ImageFiles
	dir     *runs.Dir
	sess    *orchestrate.Session
	labels  map[string]string

	secrets   []string // secret forwarded values, redacted from every artifact (redact.go)
	stdout    capBuffer
	stderr    capBuffer
	agentExit *int
	running   *orchestrate.Running
	obs       *observer  // reads each role's process from outside (sandbox_outside.go)
	outCap    *outputCap // stops a role whose output passes its cap (sandbox_outputcap.go)
	capOver   map[string]string
}

// runSandbox carries out the whole lifecycle: every phase in order, then
// artifacts and teardown on every path.
func runSandbox(ctx context.Context, s Streams, o sandboxOptions) error {
	j := &job{s: s, o: o, getenv: os.Getenv, started: time.Now().UTC()}
	j.phases = &phaseLog{w: s.Err, quiet: o.quiet}
	j.meta = runs.Metadata{Schema: runs.MetadataSchema, Command: o.command, Started: j.started,
		Networks: []runs.Network{}, Containers: []runs.Container{}, Degradations: []string{}}
	err := j.execute(ctx)
	err = j.finish(ctx, err)
	if c, ok := j.engine.(*dockerx.Client); ok {
		c.Close()
	}
	return interrupted(ctx, err)
}

// execute runs the phases up to the workload's exit.
func (j *job) execute(ctx context.Context) error {
	steps := []struct {
		name string
		f    func(context.Context) error
	}{
		{"spec", j.loadSpec},
		{"preflight", j.preflight},
		{"image", j.ensureImage},
		{"run-dir", j.makeRunDir},
		{"networks", j.createNetworks},
		{"gateway", j.startRole(orchestrate.RoleGateway)},
		{"sidecar", j.startRole(orchestrate.RoleSidecar)},
		{"agent", j.startAgent},
		{"wait", j.waitAgent},
	}
	for _, st := range steps {
		if st.name == "gateway" || st.name == "sidecar" {
			if _, ok := j.sess.Step(st.name); !ok {
				continue // the spec does not have this component
			}
		}
		if err := j.phases.do(st.name, func() error { return st.f(ctx) }); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func (j *job) loadSpec(context.Context) error {
	var name string
	var err error
	j.spec, name, err = loadSpec(j.o.specFile) // spec.go: --spec, ./sandbox_spec.toml, or built-in
	if !j.o.quiet && name != "" {
		fmt.Fprintf(j.s.Err, "spec: %s\n", name)
	}
	if err == nil {
		j.profile, err = spec.Resolve(j.spec)
	}
	if err != nil {
		return withCode(ExitInvalidSpec, err)
	}
	return nil
}

func (j *job) preflight(ctx context.Context) error {
	eng, err := dockerx.New()
	if err != nil {
		return withHint(ExitUnavailable, err, "set DOCKER_HOST or start the Docker daemon")
	}
	j.engine = eng
	v, err := eng.Version(ctx)
	if err != nil {
		return withHint(ExitUnavailable, err, "is the Docker daemon running and is its socket readable by you? (DOCKER_HOST)")
	}
	j.meta.Engine = runs.Engine{Version: v.Version, APIVersion: v.APIVersion}
	if err := j.checkEngine(v); err != nil {
		return err
	}
	if err := j.checkHost(); err != nil {
		return err
	}
	if j.labels, err = extraLabels(j.getenv(envExtraLabels)); err != nil {
		return err
	}
	j.gc(ctx)
	return nil
}

// checkEngine refuses engines older than 26 unless the user accepts the
// degradation explicitly; the plan's DNS isolation still applies.
func (j *job) checkEngine(v dockerx.EngineVersion) error {
	major, err := engineMajor(v.Version)
	if err != nil {
		return withCode(ExitUnavailable, err)
	}
	if major >= minEngineMajor {
		return nil
	}
	msg := fmt.Sprintf("Docker Engine %s is older than %d: such engines let containers on --internal networks resolve external names, "+
		"and give them a default route (what is sent through it is dropped by Docker's isolation rules)", v.Version, minEngineMajor)
	if !j.o.allowOldEngine {
		return withHint(ExitUnavailable, errors.New(msg),
			"upgrade Docker Engine, or accept the risk with --allow-old-engine ("+envAllowOldEngine+"=1)")
	}
	d := msg + "; accepted by --allow-old-engine: internal containers get an unroutable upstream DNS server, " +
		"and are held at start until the harness has removed their default route"
	j.meta.Degradations = append(j.meta.Degradations, d)
	fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	return nil
}

// checkHost makes sure the variables the agent needs exist before anything
// is created. Only a real model run needs them.
func (j *job) checkHost() error {
	if j.o.workload != orchestrate.WorkloadAgent || !j.spec.Has(spec.CapOpenAIAgents) {
		return nil
	}
	if err := checkAgentHost(j.profile.Gateway, j.getenv); err != nil {
		hint := "" // only the hint that applies to this failure (issue 13)
		if he := (*agent.HostError)(nil); errors.As(err, &he) {
			hint = he.Hint
		}
		return withHint(ExitUnavailable, err, hint)
	}
	return nil
}

// gc removes what dead runs left, before this run adds its own.
func (j *job) gc(ctx context.Context) {
	host, _ := os.Hostname()
	got, err := orchestrate.GC(ctx, j.engine, host, pidAlive)
	if n := len(got.Containers) + len(got.Networks); n > 0 && !j.o.quiet {
		fmt.Fprintf(j.s.Err, "gc: removed %d container(s) and %d network(s) left by dead runs\n", len(got.Containers), len(got.Networks))
	}
	if err != nil {
		fmt.Fprintf(j.s.Err, "warning: gc: %v\n", err)
	}
}

// pidAlive reports whether a process exists (signal 0 probes without
// delivering anything).
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
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
	method, info, err := orchestrate.EnsureImage(ctx, j.engine, img, j.getenv(envImageMethod) == orchestrate.MethodImport)
	if err != nil {
		return err
	}
	j.meta.Image = runs.Image{Tag: img.Tag, Built: method != orchestrate.MethodReused, Method: method, SizeBytes: info.Size}
	if !j.o.quiet {
		verb := map[string]string{orchestrate.MethodReused: "reused", orchestrate.MethodBuild: "built with the classic builder",
			orchestrate.MethodImport: "imported from a root filesystem (no builder)"}[method]
		fmt.Fprintf(j.s.Err, "image %s %s (%.1f MB)\n", img.Tag, verb, float64(info.Size)/1e6)
	}
	return nil
}

func (j *job) imageFiles() (dockerx.ImageFiles, error) {
	binPath := j.getenv(envImageBinary)
	if binPath == "" {
		p, err := os.Executable()
		if err != nil {
			return dockerx.ImageFiles{}, fmt.Errorf("finding this binary: %w", err)
		}
		binPath = p
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return dockerx.ImageFiles{}, fmt.Errorf("reading the binary for the image: %w", err)
	}
	caPath := j.getenv(envCABundle)
	if caPath == "" {
		caPath = "/etc/ssl/certs/ca-certificates.crt"
	}
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return dockerx.ImageFiles{}, withHint(ExitUnavailable, fmt.Errorf("reading CA certificates: %w", err),
			"install ca-certificates or point "+envCABundle+" at a PEM bundle")
	}
	labels := map[string]string{orchestrate.LabelApp: "image"}
	for k, v := range j.labels {
		labels[k] = v
	}
	img, err := orchestrate.NewImage(orchestrate.ImageSource{Binary: bin, CACerts: ca}, labels)
	if err != nil {
		return img, withHint(ExitUnavailable, err, "build with: make build (CGO_ENABLED=0), or set "+envImageBinary)
	}
	return img, nil
}

// capBuffer keeps the first max bytes written and counts the rest.
type capBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
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

func (b *capBuffer) Bytes() []byte {
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
	if j.sess != nil {
		j.capOver = j.stopOutputCap()
		if !j.o.keep { // kept servers (gateway, sidecar) stay up for the user to talk to
			j.sess.Stop(bg)
		}
		j.finishObserving()
		_ = j.phases.do("collect", func() error { return j.collect(bg) })
	}
	verdictErr := j.verdict(runErr)
	if j.sess != nil {
		// Teardown gets a budget of its own: on a busy engine (dozens of
		// runs at once) stopping and collecting can use up bg's, and a
		// network removal cut short is a network left behind.
		td, cancelTD := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		_ = j.phases.do("teardown", func() error { return j.teardown(td) })
		cancelTD()
		j.secureRunDir()
	}
	err := errors.Join(runErr, verdictErr)
	j.meta.ExitCode = exitCodeOf(err)
	if ctx.Err() != nil {
		j.meta.ExitCode = exitInterrupted
	}
	j.writeMetadata()
	if j.dir != nil {
		if terr := timeline.Write(j.dir.Path); terr != nil {
			fmt.Fprintf(j.s.Err, "warning: timeline: %v\n", terr)
		}
		j.summary(err)
		j.dir.Close()
	}
	return err
}

func exitCodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	code, _ := codeOf(err)
	return code
}

func (j *job) teardown(ctx context.Context) error {
	j.recordContainers()
	if j.o.keep {
		j.meta.Kept = true
		j.meta.RemoveCommand = j.sess.RemoveCommand()
		fmt.Fprintf(j.s.Err, "kept the sandbox (gc leaves it); remove it with:\n  %s\nor, with its run directory:\n  mcpsidecar runs rm %s --runs-dir %s\n",
			j.meta.RemoveCommand[2], j.dir.ID, filepath.Dir(j.dir.Path))
		return nil
	}
	return j.sess.Teardown(ctx)
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

// summary prints where the record is, and with --json a machine summary.
func (j *job) summary(err error) {
	if j.o.json {
		out := map[string]any{"run_id": j.dir.ID, "run_dir": j.dir.Path, "exit_code": j.meta.ExitCode,
			"verdict": j.meta.Verdict, "phases": j.meta.Phases, "image": j.meta.Image, "degradations": j.meta.Degradations}
		if err != nil {
			out["error"] = err.Error()
		}
		_ = writeJSONDoc(j.s.Out, runSummarySchema, out) // jsondoc.go
		return
	}
	fmt.Fprintf(j.s.Err, "run results saved to: %s\n", j.dir.Path)
}

// phaseLog prints one progress line per phase and records its timing.
type phaseLog struct {
	w     io.Writer
	quiet bool
	list  []runs.Phase
}

func (p *phaseLog) do(name string, f func() error) error {
	start := time.Now()
	err := f()
	d := time.Since(start)
	ph := runs.Phase{Name: name, Start: start.UTC(), DurationMS: float64(d.Microseconds()) / 1000, OK: err == nil}
	if err != nil {
		ph.Error = firstLine(err.Error())
	}
	p.list = append(p.list, ph)
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
