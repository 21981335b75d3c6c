package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
// Docker still builds our image; the plan is the Docker backend's, mapped
// by internal/kube. A field left zero is the ordinary behaviour.
type Kube struct {
	Client          *kube.Client
	NamespacePrefix string
	// ImportSocket, when set, is the containerd socket of a node on this
	// machine: our image is imported there (kube.ImportToContainerd)
	// after it is built. Empty: the cluster must already hold the image
	// under its tag (a registry is not supported yet).
	ImportSocket string
	// NodeRoot is the kubelet root directory of the cluster's one node
	// when that node is this machine (the test cluster). The run's
	// seccomp profile is installed under its seccomp directory, and the
	// roles' output files are read from their output volumes there
	// (kube.NodeOutputDir) once the roles have stopped. Empty: the pods
	// use the runtime's default seccomp profile (a recorded degradation)
	// and no role's output file is collected (so the verdict fails:
	// there is no hardening report and no decision log).
	NodeRoot string
	// HolderImage is an image whose command waits until it is stopped
	// (a pause image; the test cluster's is
	// localhost/mcpsidecar-kube-pause:1). With NodeRoot, the agent's pod
	// gets a container of it, "holder", so the pod keeps running, and the
	// kubelet keeps its output volume, after the agent has exited: the
	// kubelet tears down the volumes of a pod that has ended.
	HolderImage string
	// PodAddresses addresses the roles by their pods' addresses, for
	// clusters without kube-proxy (kube.CreateOptions.PodAddresses).
	PodAddresses bool
	// GatewayHosts are /etc/hosts entries of the gateway pod
	// (kube.Input.GatewayHosts): names it resolves without the cluster's
	// DNS.
	GatewayHosts []kube.HostEntry
}

// kubeRun is a run on the cluster.
type kubeRun struct {
	k  *Kube
	ns string // "" until the namespace exists
}

// kubePlanInput holds no role at start: the hold that works around an old
// Docker engine's default route has no counterpart on a pod (a pod's
// routes are the network plugin's), and nothing would release it.
func kubePlanInput(next func(*orchestrate.Input) error) func(*orchestrate.Input) error {
	return func(in *orchestrate.Input) error {
		in.HoldInternal = false
		if next != nil {
			return next(in)
		}
		return nil
	}
}

// kubeApply creates the run's objects (phase "pods": namespace, Services,
// policies, gateway and sidecar until Ready, the agent), waits for the
// agent's end (phase "wait") and records the workload's output.
func (j *job) kubeApply(ctx context.Context) error {
	k := j.o.Kube
	j.kube = &kubeRun{k: k}
	j.kubeEngineNote()
	in := kube.Input{Plan: j.sess.Plan, Profile: j.profile, RuntimeImage: j.image.Tag, NamespacePrefix: k.NamespacePrefix,
		Token: token(), RuntimeDefaultSeccomp: k.NodeRoot == "", GatewayHosts: k.GatewayHosts}
	if err := j.phases.do("kube-image", func() error { return j.kubePrepare(ctx, in) }); err != nil {
		return err
	}
	var run *kube.Run
	err := j.phases.do("pods", func() error {
		j.kube.ns = in.NamespaceName() // Create deletes it again on failure; teardown deletes it too
		var err error
		run, err = k.Client.Create(ctx, in, kube.CreateOptions{ReadyTimeout: j.o.ReadyTimeout, PodAddresses: k.PodAddresses, Adjust: k.addHolder})
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
		if err := j.kubeStarted(run.Namespace, c); err != nil {
			return err
		}
	}
	if err := j.kubeLayers(ctx, run); err != nil {
		return err
	}
	return j.phases.do(orchestrate.PhaseWait, func() error { return j.kubeWait(ctx, run.Namespace) })
}

// kubeEngineNote qualifies the old-engine degradation checkEngine
// recorded: on this backend Docker only builds the image, so none of the
// Docker workarounds it names applies.
func (j *job) kubeEngineNote() {
	for i, d := range j.meta.Degradations {
		if strings.HasPrefix(d, "Docker Engine ") && strings.Contains(d, "accepted by --allow-old-engine") {
			j.meta.Degradations[i] = d + " (Kubernetes backend: this engine only built the image; no role ran on it and none was held)"
		}
	}
}

// holderName is the agent pod's volume-holding container.
const holderName = "holder"

// holderLimit bounds the holder: it only waits.
var holderLimit = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}

// addHolder gives the workload's pod the holder container (see
// HolderImage), with the agent container's security context (non-root,
// read-only root, no capability, our seccomp profile) and the output
// volume, read-only.
func (k *Kube) addHolder(p *corev1.Pod) {
	if k.NodeRoot == "" || p.Name != kube.PodName(orchestrate.RoleAgent) {
		return
	}
	main := p.Spec.Containers[0]
	h := corev1.Container{Name: holderName, Image: k.HolderImage, ImagePullPolicy: corev1.PullIfNotPresent,
		SecurityContext: main.SecurityContext.DeepCopy(), Resources: corev1.ResourceRequirements{Limits: holderLimit, Requests: holderLimit}}
	for _, m := range main.VolumeMounts {
		if m.Name == kube.OutputVolume {
			m.ReadOnly = true
			h.VolumeMounts = append(h.VolumeMounts, m)
		}
	}
	p.Spec.Containers = append(p.Spec.Containers, h)
}

// kubeStarted writes a service's <role>-start-results.json, as the
// Docker backend does; the pods phase timed them together.
func (j *job) kubeStarted(ns string, c *orchestrate.Container) error {
	if c.Step.Workload {
		return nil
	}
	res := startResult{Role: c.Step.Role, Container: c.ID, ID: ns + "/" + c.ID, IPs: c.IPs, OK: true,
		Action:     "create the pod (Kubernetes), wait until the kubelet's readiness probe passes (HTTP GET /healthz on the pod's address)",
		DurationMS: j.phases.list[len(j.phases.list)-1].DurationMS}
	return j.writeJSON(runs.StartResultsFile(c.Step.Role), []startResult{res})
}

// kubePrepare brings the image and the seccomp profile to the node.
func (j *job) kubePrepare(ctx context.Context, in kube.Input) error {
	k := j.o.Kube
	if k.NodeRoot == "" {
		d := "kubernetes: the pods use the runtime's default seccomp profile, not ours (no node directory to install it in: --kube-node-root)"
		j.meta.Degradations = append(j.meta.Degradations, d)
		fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	} else if err := installSeccomp(k.NodeRoot, in.Plan); err != nil {
		return err
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

// installSeccomp writes each seccomp profile of the plan (the text the
// Docker backend passes inline, which the mapping names by its hash)
// where the node's kubelet reads Localhost profiles; a file already there
// under that name holds the same profile.
func installSeccomp(nodeRoot string, plan orchestrate.Plan) error {
	for _, st := range plan.Containers {
		for _, o := range st.Spec.SecurityOpt {
			if prof, ok := strings.CutPrefix(o, "seccomp="); ok {
				if err := installProfile(nodeRoot, prof); err != nil {
					return err
				}
			}
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

// kubeWait waits for the agent's end, bounded by the run's timeout, and
// copies its log (stdout and stderr as one stream: the API merges them)
// to the workload's stdout.
func (j *job) kubeWait(ctx context.Context, ns string) error {
	c := j.sess.Find(orchestrate.RoleAgent)
	j.running = &orchestrate.Running{}
	code, err := j.o.Kube.Client.WaitDone(ctx, ns, c.ID, j.o.Timeout)
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
	if err := j.o.Kube.Client.Logs(lctx, ns, c.ID, kube.ContainerName, io.MultiWriter(j.s.Out, &j.stdout)); err != nil {
		return err
	}
	if code != 0 {
		fmt.Fprintf(j.s.Err, "the workload exited with code %d\n", code)
	}
	return nil
}

// kubeStop copies every role's output files from the node into the run
// directory, where collect finds them as after a Docker run, and stops
// the services. A service's files are copied while it still runs: the
// kubelet tears down the volumes of a pod whose containers have all
// ended, and Kubernetes cannot stop one container of a pod. So a line a
// service writes as it stops (a call interrupted at teardown) is not in
// the record on this backend; doctor makes no such call. The agent's
// volume is kept after its exit by the holder container (addHolder).
func (j *job) kubeStop(ctx context.Context) {
	if j.kube == nil || j.kube.ns == "" || len(j.sess.Containers) == 0 {
		return
	}
	if j.o.Kube.NodeRoot == "" {
		d := "kubernetes: the roles' output files (decision log, audit, hardening reports) were not collected: no node directory to read them from (--kube-node-root)"
		j.meta.ArtifactProblems = append(j.meta.ArtifactProblems, d)
	}
	for _, c := range j.sess.Containers {
		if j.o.Kube.NodeRoot != "" {
			if err := j.copyNodeOutput(ctx, c.Step.Role, c.ID); err != nil {
				j.meta.ArtifactProblems = append(j.meta.ArtifactProblems, err.Error())
				fmt.Fprintf(j.s.Err, "warning: not collected: %v\n", err)
			}
		}
	}
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
				j.kubeStopService(ctx, c)
			}()
		}
		wg.Wait()
	}
}

// kubeStopService stops one service's pod and records its exit code.
func (j *job) kubeStopService(ctx context.Context, c *orchestrate.Container) {
	code, err := j.o.Kube.Client.Stop(ctx, j.kube.ns, c.ID, orchestrate.StopGrace+30*time.Second)
	if err != nil {
		fmt.Fprintf(j.s.Err, "warning: %v\n", err)
		return
	}
	c.ExitCode = &code
}

// copyNodeOutput copies the files collect reads (runs.RoleFiles and the
// harden report) from the role's output volume on the node into its
// output directory in the run directory. The volume was writable by the
// sandboxed role: a name that is not a regular file (a planted link, a
// FIFO) is refused, never followed, and a file is read up to its cap.
func (j *job) copyNodeOutput(ctx context.Context, role, pod string) error {
	p, err := j.o.Kube.Client.Pod(ctx, j.kube.ns, pod)
	if err != nil {
		return err
	}
	src, err := os.OpenRoot(kube.NodeOutputDir(j.o.Kube.NodeRoot, string(p.UID)))
	if err != nil {
		return fmt.Errorf("%s output volume: %w", role, err)
	}
	defer src.Close()
	dst, err := os.OpenRoot(filepath.Join(j.dir.Path, role))
	if err != nil {
		return fmt.Errorf("%s output directory: %w", role, err)
	}
	defer dst.Close()
	var errs []error
	for _, name := range append([]string{runs.FileHardenReport}, runs.RoleFiles[role]...) {
		errs = append(errs, copyRegular(src, dst, name, maxCapture))
	}
	return errors.Join(errs...)
}

func copyRegular(src, dst *os.Root, name string, limit int64) error {
	st, err := src.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): not copied", name, st.Mode().Type())
	}
	if st.Size() > limit {
		return fmt.Errorf("%s is %d bytes, over the %d-byte cap: not copied", name, st.Size(), limit)
	}
	in, err := src.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.LimitReader(in, limit))
	return errors.Join(err, out.Close())
}

// kubeTeardown deletes the run's namespace and waits until it is gone.
func (j *job) kubeTeardown(ctx context.Context) error {
	j.recordContainers()
	if j.kube == nil || j.kube.ns == "" {
		return nil
	}
	return j.o.Kube.Client.Delete(ctx, j.kube.ns)
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
