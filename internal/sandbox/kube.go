package sandbox

import (
	"context"
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
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Kube runs a lifecycle's roles as pods of a Kubernetes cluster instead
// of Docker containers (issue 20; docs/kubernetes.md, "The backend").
// Docker still builds our image; the plan (internal/plan) is mapped to
// Kubernetes objects by internal/kube. A field left zero is the ordinary behaviour.
type Kube struct {
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
	// the API (kubeReadOutput).
	NodeRoot string
	// PodAddresses addresses the roles by their pods' addresses, for
	// clusters without kube-proxy (kube.CreateOptions.PodAddresses).
	PodAddresses bool
	// GatewayHosts are /etc/hosts entries of the gateway pod
	// (kube.Input.GatewayHosts): names it resolves without the cluster's
	// DNS.
	GatewayHosts []kube.HostEntry
}

// Kubernetes is the backend that runs the roles as pods of the cluster k
// names (issue 20; docs/kubernetes.md). One Backend is one run's: it
// holds the run's namespace.
func Kubernetes(k *Kube) Backend { return &kubeBackend{k: k} }

// kubeBackend is a run on the cluster.
type kubeBackend struct {
	k  *Kube
	ns string // "" until the namespace exists
	// image is our image as the pods name it (kube.Input.RuntimeImage):
	// the built tag, or its digest reference in the registry.
	image  string
	mu     sync.Mutex   // the services stop, and may be read, concurrently
	layers *kube.Layers // test-sandbox: the measured network layers (kube_layers.go)
}

func (b *kubeBackend) name() string { return "kubernetes" }

// preflight: the pods' processes are the cluster's (no pid is used, so
// the engine's locality is not asked); the namespaces dead runs left are
// deleted (kube_gc.go).
func (b *kubeBackend) preflight(ctx context.Context, j *job) error {
	b.gc(ctx, j)
	return nil
}

// input holds no role at start: the hold that works around an old Docker
// engine's default route has no counterpart on a pod (a pod's routes are
// the network plugin's), and nothing would release it.
func (b *kubeBackend) input(_ *job, in *orchestrate.Input) error {
	in.HoldInternal, in.HoldIsolated = false, false
	return nil
}

// outputs makes the run directory's output folders noexec, as the Docker
// backend does with host directories; the pods write to volumes of their
// own, read through the API (kube_output.go).
func (b *kubeBackend) outputs(_ context.Context, j *job, plan *orchestrate.Plan) error {
	return j.mountHostOutputs(plan)
}

func (b *kubeBackend) checks(*job) []runs.Check { return nil }

// kubeApply creates the run's objects (phase "pods": namespace, Services,
// policies, gateway and sidecar until Ready, the agent), waits for the
// agent's end (phase "wait") and records the workload's output.
func (b *kubeBackend) apply(ctx context.Context, j *job) error {
	k := b.k
	b.engineNote(j)
	in := kube.Input{Plan: j.sess.Plan, Profile: j.profile, RuntimeImage: j.image.Tag, NamespacePrefix: k.NamespacePrefix,
		Token: token(), RuntimeDefaultSeccomp: k.NodeRoot == "", GatewayHosts: k.GatewayHosts}
	if err := j.phases.do("kube-image", func() error { return b.prepare(ctx, j, &in) }); err != nil {
		return err
	}
	b.image = in.RuntimeImage
	var run *kube.Run
	err := j.phases.do("pods", func() error {
		b.ns = in.NamespaceName() // Create deletes it again on failure; teardown deletes it too
		var err error
		run, err = k.Client.Create(ctx, in, kube.CreateOptions{ReadyTimeout: j.o.ReadyTimeout, PodAddresses: k.PodAddresses, Adjust: addHolder(in.RuntimeImage)})
		return err
	})
	if err != nil {
		return exitcode.With(exitcode.Unavailable, err)
	}
	j.sess.Engine = kubeLogs{Engine: j.sess.Engine, c: k.Client, ns: run.Namespace}
	for _, st := range j.sess.Plan.Containers {
		c := &orchestrate.Container{Step: st, ID: kube.PodName(st.Role), IPs: map[string]string{}}
		if p, err := k.Client.Pod(ctx, run.Namespace, c.ID); err == nil {
			c.IPs["pod"] = p.Status.PodIP
		}
		j.sess.Containers = append(j.sess.Containers, c)
		if err := b.started(j, c); err != nil {
			return err
		}
	}
	if err := b.measureLayers(ctx, j, run); err != nil {
		return err
	}
	return j.phases.do(orchestrate.PhaseWait, func() error { return b.wait(ctx, j) })
}

// engineNote qualifies the old-engine degradation checkEngine
// recorded: on this backend Docker only builds the image, so none of the
// Docker workarounds it names applies.
func (b *kubeBackend) engineNote(j *job) {
	for i, d := range j.meta.Degradations {
		if strings.HasPrefix(d, "Docker Engine ") && strings.Contains(d, "accepted by --allow-old-engine") {
			j.meta.Degradations[i] = d + " (Kubernetes backend: this engine only built the image; no role ran on it and none was held)"
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
func (b *kubeBackend) started(j *job, c *orchestrate.Container) error {
	if c.Step.Workload {
		return nil
	}
	res := startResult{Role: c.Step.Role, Container: c.ID, ID: b.ns + "/" + c.ID, IPs: c.IPs, OK: true,
		Action:     "create the pod (Kubernetes), wait until the kubelet's readiness probe passes (HTTP GET /healthz on the pod's address)",
		DurationMS: j.phases.list[len(j.phases.list)-1].DurationMS}
	return j.writeJSON(runs.StartResultsFile(c.Step.Role), []startResult{res})
}

// kubePrepare brings the image and the seccomp profile to the node; with
// a registry, in.RuntimeImage becomes the pushed image's digest reference.
func (b *kubeBackend) prepare(ctx context.Context, j *job, in *kube.Input) error {
	k := b.k
	if k.NodeRoot == "" {
		d := "kubernetes: the pods use the runtime's default seccomp profile, not ours (no node directory to install it in: --kube-node-root)"
		j.meta.Degradations = append(j.meta.Degradations, d)
		fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	} else if err := installSeccomp(k.NodeRoot, in.Plan); err != nil {
		return err
	}
	if k.Registry != "" {
		return b.push(ctx, j, in)
	}
	if k.ImportSocket == "" {
		return nil
	}
	saver, ok := j.sess.Engine.(interface {
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
func (b *kubeBackend) push(ctx context.Context, j *job, in *kube.Input) error {
	k := b.k
	p, ok := j.sess.Engine.(dockerx.Pusher)
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
	in.RuntimeImage = k.Registry + "@" + digest
	fmt.Fprintf(j.s.Err, "image %s pushed as %s; the pods run %s\n", j.image.Tag, target, in.RuntimeImage)
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
func (b *kubeBackend) wait(ctx context.Context, j *job) error {
	c := j.sess.Find(orchestrate.RoleAgent)
	j.running = &orchestrate.Running{}
	code, err := b.k.Client.WaitDone(ctx, b.ns, c.ID, j.o.Timeout)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			c.TimedOut = true
			return fmt.Errorf("%s still running after the %s timeout; stopped with its namespace: %w", c.Step.Role, j.o.Timeout, err)
		}
		return err
	}
	c.ExitCode, j.agentExit = &code, &code
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := b.k.Client.Logs(lctx, b.ns, c.ID, kube.ContainerName, io.MultiWriter(j.s.Out, &j.stdout)); err != nil {
		return err
	}
	if code != 0 {
		fmt.Fprintf(j.s.Err, "the workload exited with code %d\n", code)
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
func (b *kubeBackend) stop(ctx context.Context, j *job) {
	if b.ns == "" || len(j.sess.Containers) == 0 {
		return
	}
	read := map[string]bool{} // roles whose files were read before a forced stop
	// The services stop together, except a role that must outlive
	// another (Step.StopAfter: the gateway of a run whose sidecar closes
	// its upstream sessions through it), which stops once they have.
	for _, later := range []bool{false, true} {
		var wg sync.WaitGroup
		for _, c := range j.sess.Containers {
			if c.Step.Workload || (len(c.Step.StopAfter) > 0) != later {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if b.stopService(ctx, j, c) {
					b.mu.Lock()
					read[c.Step.Role] = true
					b.mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	var wg sync.WaitGroup
	for _, c := range j.sess.Containers {
		if !read[c.Step.Role] {
			wg.Go(func() { b.collectOutput(ctx, j, c) }) // about a second each, mostly the exec's setup
		}
	}
	wg.Wait()
}

// stopService stops one service and records its exit code. A role
// still running after the grace is stopped with its whole pod, which
// takes its volume: its files are read just before (read is then true).
func (b *kubeBackend) stopService(ctx context.Context, j *job, c *orchestrate.Container) (read bool) {
	res, err := b.k.Client.StopMain(ctx, b.ns, c.ID, kube.StopOptions{
		Grace: orchestrate.StopGrace + kubeStatusLag,
		BeforeKill: func(ctx context.Context) {
			b.collectOutput(ctx, j, c)
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
		fmt.Fprintf(j.s.Err, "warning: stopping %s: %v\n", c.Step.Role, err)
	}
	return read
}

// kubeStatusLag is how late, at most, the API tells that a container
// ended: the kubelet notices an exit on its next relist (every second)
// and then updates the pod's status.
const kubeStatusLag = 5 * time.Second

// collectOutput reads a role's output files into the run directory;
// what was refused or failed is an artifact problem.
func (b *kubeBackend) collectOutput(ctx context.Context, j *job, c *orchestrate.Container) {
	rctx, cancel := context.WithTimeout(ctx, kubeReadTimeout)
	defer cancel()
	problems, err := b.readOutput(rctx, j, c)
	if err != nil {
		problems = append(problems, err.Error())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range problems {
		msg := fmt.Sprintf("%s output: %s", c.Step.Role, p)
		j.meta.ArtifactProblems = append(j.meta.ArtifactProblems, msg)
		fmt.Fprintf(j.s.Err, "warning: not collected as is: %s\n", msg)
	}
}

// kubeReadTimeout bounds one role's read: a few files of at most
// kubeOutputCap each, streamed through the API.
const kubeReadTimeout = time.Minute

// teardown deletes the run's namespace and waits until it is gone.
func (b *kubeBackend) teardown(ctx context.Context, _ *job) error {
	if b.ns == "" {
		return nil
	}
	return b.k.Client.Delete(ctx, b.ns)
}

// kubeLogs reads a role's log through the API (the container id is the
// pod's name); every other call goes to the Docker engine.
type kubeLogs struct {
	dockerx.Engine
	c  *kube.Client
	ns string
}

// Logs writes the pod's log to stderr: the API merges the container's
// two streams, and our roles log to stderr.
func (k kubeLogs) Logs(ctx context.Context, id string, _, stderr io.Writer) error {
	return k.c.Logs(ctx, k.ns, id, kube.ContainerName, stderr)
}
