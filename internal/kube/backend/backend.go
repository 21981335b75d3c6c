package kubebackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/hostoutput"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// Config runs a lifecycle's roles as pods of a Kubernetes cluster instead
// of Docker containers (issue 20; docs/kubernetes.md, "The backend").
// Docker still builds our image; the plan (internal/plan) is mapped to
// Kubernetes objects by internal/kube. A field left zero is the ordinary behaviour.
type Config struct {
	Client          *kube.Client
	NamespacePrefix string
	// ImportSocket, when set, is the containerd socket of a node on this
	// machine: our image is imported there (kube.ImportToContainerd)
	// after it is built. Empty: the cluster must already hold the image
	// under its tag, or Registry is set.
	ImportSocket string
	// Registry, when set, is a repository (fully qualified, e.g.
	// registry.example.com/team/mcpsidecar) our image is pushed to after
	// it is built; the pods then name it by the pushed manifest's digest
	// (REPO@sha256:…), so the cluster runs exactly the bytes built here,
	// whatever the tag points to later (kubePush).
	Registry string
	// DockerConfig is the Docker client's config file whose auths hold
	// the registry's credentials (dockerx.RegistryAuth); read at push
	// time and sent to the engine only.
	DockerConfig string
	// NodeRoot is the kubelet root directory of the cluster's one node
	// when that node is this machine (the test cluster): the run's
	// seccomp profile is installed under its seccomp directory, and the
	// pods name it as a Localhost profile. Empty: the pods use the
	// runtime's default seccomp profile (a recorded degradation). The
	// record does not depend on it: the output files are read through
	// the API (output.go, readOutput).
	NodeRoot string
	// PodAddresses addresses the roles by their pods' addresses, for
	// clusters without kube-proxy (kube.CreateOptions.PodAddresses).
	PodAddresses bool
	// GatewayHosts are /etc/hosts entries of the gateway pod
	// (kube.Input.GatewayHosts): names it resolves without the cluster's
	// DNS.
	GatewayHosts []kube.HostEntry
}

// New is the backend that runs the roles as pods of the cluster k
// names (issue 20; docs/kubernetes.md). One Backend is one run's: it
// holds the run's namespace.
func New(k *Config) sandbox.Backend { return &kubeBackend{k: k} }

// kubeBackend is a run on the cluster.
type kubeBackend struct {
	k  *Config
	ns string // "" until the namespace exists
	// image is our image as the pods name it (kube.Input.RuntimeImage):
	// the built tag, or its digest reference in the registry.
	image  string
	mu     sync.Mutex   // the services stop, and may be read, concurrently
	layers *kube.Layers // test-sandbox: the measured network layers (layers.go)
	// noexec holds the run directory's output folders, made noexec on
	// this host (Outputs) and released at teardown.
	noexec *hostoutput.Mounts
}

func (b *kubeBackend) Name() string { return "kubernetes" }

// preflight: the pods' processes are the cluster's (no pid is used, so
// the engine's locality is not asked); the namespaces dead runs left are
// deleted (gc.go).
func (b *kubeBackend) Preflight(ctx context.Context, r *sandbox.Job) error {
	b.gc(ctx, r)
	return nil
}

// input holds no role at start: the hold that works around an old Docker
// engine's default route has no counterpart on a pod (a pod's routes are
// the network plugin's), and nothing would release it.
func (b *kubeBackend) Input(_ *sandbox.Job, in *orchestrate.Input) error {
	in.DropRoutes, in.HoldAll = false, false
	return nil
}

// outputs makes the run directory's output folders noexec
// (internal/hostoutput), as the Docker backend does with host
// directories; the pods write to volumes of their own, read through the
// API (output.go).
func (b *kubeBackend) Outputs(_ context.Context, r *sandbox.Job, plan *orchestrate.Plan) error {
	b.noexec = hostoutput.New(hostoutput.Noexec)
	return b.noexec.Mount(r, plan)
}

func (b *kubeBackend) Checks(*sandbox.Job) []runs.Check { return nil }

// kubeApply creates the run's objects (phase "pods": namespace, Services,
// policies, gateway and sidecar until Ready, the agent), waits for the
// agent's end (phase "wait") and records the workload's output.
func (b *kubeBackend) Apply(ctx context.Context, r *sandbox.Job) error {
	k := b.k
	b.engineNote(r.Metadata())
	in := kube.Input{Plan: r.Session().Plan, Profile: r.Profile(), RuntimeImage: r.ImageTag(), NamespacePrefix: k.NamespacePrefix,
		Token: token(), RuntimeDefaultSeccomp: k.NodeRoot == "", GatewayHosts: k.GatewayHosts}
	if err := r.Phase("kube-image", func() error { return b.prepare(ctx, r, &in) }); err != nil {
		return err
	}
	b.image = in.RuntimeImage
	var run *kube.Run
	err := r.Phase("pods", func() error {
		b.ns = in.NamespaceName() // Create deletes it again on failure; teardown deletes it too
		var err error
		run, err = k.Client.Create(ctx, in, kube.CreateOptions{ReadyTimeout: r.Options().ReadyTimeout, PodAddresses: k.PodAddresses, Adjust: addHolder(in.RuntimeImage)})
		return err
	})
	var exited *kube.ExitedError
	if errors.As(err, &exited) {
		return err // a role that failed to start, as on Docker (exit 1)
	}
	if err != nil {
		return exitcode.With(exitcode.Unavailable, err)
	}
	sess := r.Session()
	for _, st := range sess.Plan.Containers {
		c := &orchestrate.Container{Step: st, ID: kube.PodName(st.Role), IPs: map[string]string{}}
		if p, err := k.Client.Pod(ctx, run.Namespace, c.ID); err == nil {
			c.IPs["pod"] = p.Status.PodIP
		}
		sess.Containers = append(sess.Containers, c)
		if err := b.started(r, c); err != nil {
			return err
		}
	}
	if err := b.measureLayers(ctx, r, run); err != nil {
		return err
	}
	defer b.startLiveCopy(ctx, r)() // the logs, live, and a last copy (output.go)
	return r.Phase(orchestrate.PhaseWait, func() error { return b.wait(ctx, r) })
}

// engineNote qualifies the old-engine degradation checkEngine
// recorded: on this backend Docker only builds the image, so none of the
// Docker workarounds it names applies.
func (b *kubeBackend) engineNote(m *runs.Metadata) {
	for i, d := range m.Degradations {
		if strings.HasPrefix(d, "Docker Engine ") && strings.Contains(d, "accepted by --allow-old-engine") {
			m.Degradations[i] = d + " (Kubernetes backend: this engine only built the image; no role ran on it and none was held)"
		}
	}
}

// holderLimit bounds the holder. It mostly waits; the reads run in its
// cgroup too (a Go process streaming files of up to runs.MaxCopyBytes, as the Docker backend copies), and a
// CPU limit of a few millicores would make each one take seconds.
var (
	holderLimit   = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	holderRequest = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
)

// addHolder gives every role's pod that has an output volume the holder
// container (kube.HolderContainer): our image, our hold command, the
// main container's security context (non-root, read-only root, no
// capability, the same seccomp profile), and the output volume,
// read-only, at the same path. It keeps the pod, and so the volume,
// after the role has exited, so the files the role wrote while it
// stopped are read through the API afterwards.
func addHolder(image string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		main := p.Spec.Containers[0]
		h := corev1.Container{Name: kube.HolderContainer, Image: image, Command: kube.HolderArgs(), ImagePullPolicy: corev1.PullIfNotPresent,
			SecurityContext: main.SecurityContext.DeepCopy(), Resources: corev1.ResourceRequirements{Limits: holderLimit, Requests: holderRequest},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
		for _, m := range main.VolumeMounts {
			if m.Name == kube.OutputVolume {
				m.ReadOnly = true
				h.VolumeMounts = append(h.VolumeMounts, m)
			}
		}
		if len(h.VolumeMounts) > 0 {
			p.Spec.Containers = append(p.Spec.Containers, h)
		}
	}
}

// started writes a service's <role>-start-results.json, as the
// Docker backend does; the pods phase timed them together.
func (b *kubeBackend) started(r *sandbox.Job, c *orchestrate.Container) error {
	if c.Step.Workload {
		return nil
	}
	res := sandbox.StartResult{Role: c.Step.Role, Container: c.ID, ID: b.ns + "/" + c.ID, IPs: c.IPs, OK: true,
		Action:     "create the pod (Kubernetes), wait until the kubelet's readiness probe passes (HTTP GET /healthz on the pod's address)",
		DurationMS: r.LastPhaseMS()}
	return r.WriteJSON(runs.StartResultsFile(c.Step.Role), []sandbox.StartResult{res})
}

// kubePrepare brings the image and the seccomp profile to the node; with
// a registry, in.RuntimeImage becomes the pushed image's digest reference.
func (b *kubeBackend) prepare(ctx context.Context, r *sandbox.Job, in *kube.Input) error {
	k := b.k
	if k.NodeRoot == "" {
		d := "kubernetes: the pods use the runtime's default seccomp profile, not ours (no node directory to install it in: --kube-node-root)"
		r.Degrade(d)
	} else if err := installSeccomp(k.NodeRoot, in.Plan); err != nil {
		return err
	}
	if k.Registry != "" {
		return b.push(ctx, r.Engine(), r.Say, in)
	}
	if k.ImportSocket == "" {
		return nil
	}
	saver, ok := r.Engine().(interface {
		SaveImage(context.Context, string) (io.ReadCloser, error)
	})
	if !ok {
		return fmt.Errorf("importing %s: the engine cannot export images", in.RuntimeImage)
	}
	return kube.ImportToContainerd(ctx, k.ImportSocket, in.RuntimeImage, saver.SaveImage)
}

// kubePush tags our image as REPO:<its content hash>, pushes it through
// the engine and names it by digest for the pods. The tag is a content
// hash, but a registry's tag can be moved by anyone who may push to it;
// the digest cannot, so a pod runs the bytes built here or none. The
// credential (if any) goes from the config file to the engine's header
// only, never to an artifact or a message.
func (b *kubeBackend) push(ctx context.Context, engine dockerx.Engine, say func(string, ...any), in *kube.Input) error {
	k := b.k
	p, ok := engine.(dockerx.Pusher)
	if !ok {
		return fmt.Errorf("pushing %s: the engine cannot push images", in.RuntimeImage)
	}
	_, tag, _ := strings.Cut(in.RuntimeImage, ":")
	target := k.Registry + ":" + tag
	if err := p.TagImage(ctx, in.RuntimeImage, target); err != nil {
		return err
	}
	auth, err := dockerx.RegistryAuth(k.DockerConfig, k.Registry)
	if err != nil {
		return err
	}
	digest, err := p.PushImage(ctx, target, auth)
	if err != nil {
		return err
	}
	built := in.RuntimeImage
	in.RuntimeImage = k.Registry + "@" + digest
	say("image %s pushed as %s; the pods run %s", built, target, in.RuntimeImage)
	return nil
}

// installSeccomp writes each seccomp profile of the plan (which the
// mapping names by its hash)
// where the node's kubelet reads Localhost profiles; a file already there
// under that name holds the same profile.
func installSeccomp(nodeRoot string, plan orchestrate.Plan) error {
	for _, st := range plan.Containers {
		if st.Spec.Seccomp == "" {
			continue
		}
		if err := installProfile(nodeRoot, st.Spec.Seccomp); err != nil {
			return err
		}
	}
	return nil
}

func installProfile(nodeRoot, profile string) error {
	path := filepath.Join(nodeRoot, "seccomp", kube.SeccompDir, kube.SeccompFile(profile))
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("installing the seccomp profile: %w", err)
	}
	tmp := path + ".tmp" + token()
	if err := os.WriteFile(tmp, []byte(profile), 0o644); err != nil {
		return fmt.Errorf("installing the seccomp profile: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("installing the seccomp profile: %w", err)
	}
	return nil
}

// wait waits for the agent's end, bounded by the run's timeout, and
// copies its log (stdout and stderr as one stream: the API merges them)
// to the workload's stdout.
func (b *kubeBackend) wait(ctx context.Context, r *sandbox.Job) error {
	c := r.Session().Find(orchestrate.RoleAgent)
	r.WorkloadStarted()
	timeout := r.Options().Timeout
	code, err := b.k.Client.WaitDone(ctx, b.ns, c.ID, timeout)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			c.TimedOut = true
			return fmt.Errorf("%s still running after the %s timeout; stopped with its namespace: %w", c.Step.Role, timeout, err)
		}
		return err
	}
	c.ExitCode = &code
	r.WorkloadExited(code)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := b.k.Client.Logs(lctx, b.ns, c.ID, kube.ContainerName, r.WorkloadOutput()); err != nil {
		return err
	}
	if code != 0 {
		r.Say("the workload exited with code %d", code)
	}
	return nil
}

// stop stops the services and reads every role's output files into
// the run directory, where collect finds them as after a Docker run. The
// services are stopped first, each by our stop command in its main
// container (SIGTERM to the role, kube.Client.StopMain), and their files
// read only once they have ended: the lines a role writes as it stops (a
// call interrupted at teardown, a gateway request cut off) are in the
// record. The holder keeps each pod and its volume meanwhile; the
// namespace is deleted afterwards (teardown).
func (b *kubeBackend) Stop(ctx context.Context, r *sandbox.Job) {
	sess := r.Session()
	if b.ns == "" || len(sess.Containers) == 0 {
		return
	}
	read := map[string]bool{} // roles whose files were read before a forced stop
	// The services stop together, except a role that must outlive
	// another (Step.StopAfter: the gateway of a run whose sidecar closes
	// its upstream sessions through it), which stops once they have.
	for _, later := range []bool{false, true} {
		var wg sync.WaitGroup
		for _, c := range sess.Containers {
			if c.Step.Workload || (len(c.Step.StopAfter) > 0) != later {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if b.stopService(ctx, r, c) {
					b.mu.Lock()
					read[c.Step.Role] = true
					b.mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	var wg sync.WaitGroup
	for _, c := range sess.Containers {
		if !read[c.Step.Role] {
			wg.Go(func() { b.collectOutput(ctx, r, c) }) // about a second each, mostly the exec's setup
		}
	}
	wg.Wait()
}

// stopService stops one service and records its exit code. A role
// still running after the grace is stopped with its whole pod, which
// takes its volume: its files are read just before (read is then true).
func (b *kubeBackend) stopService(ctx context.Context, r *sandbox.Job, c *orchestrate.Container) (read bool) {
	res, err := b.k.Client.StopMain(ctx, b.ns, c.ID, kube.StopOptions{
		Grace: orchestrate.StopGrace + kubeStatusLag,
		BeforeKill: func(ctx context.Context) {
			b.collectOutput(ctx, r, c)
			read = true
		},
		KillTimeout: orchestrate.StopGrace + 30*time.Second,
	})
	if res.ExitCode >= 0 {
		code := res.ExitCode
		c.ExitCode = &code
	}
	c.KilledAtStop = res.Killed
	if err != nil {
		r.Warn("stopping %s: %v", c.Step.Role, err)
	}
	return read
}

// kubeStatusLag is how late, at most, the API tells that a container
// ended: the kubelet notices an exit on its next relist (every second)
// and then updates the pod's status.
const kubeStatusLag = 5 * time.Second

// collectOutput reads a role's output files into the run directory;
// what was refused or failed is an artifact problem.
func (b *kubeBackend) collectOutput(ctx context.Context, r *sandbox.Job, c *orchestrate.Container) {
	rctx, cancel := context.WithTimeout(ctx, kubeReadTimeout)
	defer cancel()
	problems, err := b.readOutput(rctx, r, c)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range problems {
		r.ArtifactProblem(fmt.Sprintf("%s output: %s", c.Step.Role, p))
	}
}

// kubeReadTimeout bounds one role's read: a few files of at most
// holder.OutputCap each, streamed through the API.
const kubeReadTimeout = time.Minute

// teardown deletes the run's namespace and waits until it is gone, and
// releases the output folders' noexec mounts on every path.
func (b *kubeBackend) Teardown(ctx context.Context, r *sandbox.Job) error {
	defer b.noexec.Release(r)
	if b.ns == "" {
		return nil
	}
	return b.k.Client.Delete(ctx, b.ns)
}

// Logs writes a role's pod log to stderr (the container id is the pod's
// name): the API merges the container's two streams, and our roles log
// to stderr.
func (b *kubeBackend) Logs(ctx context.Context, _ *sandbox.Job, c *orchestrate.Container, _, stderr io.Writer) error {
	return b.k.Client.Logs(ctx, b.ns, c.ID, kube.ContainerName, stderr)
}

// token is a short random suffix for names (kube.Input.Token, a
// seccomp file being written).
func token() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
