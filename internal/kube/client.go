package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// Client creates and removes the Kubernetes objects of runs. It is the
// only part of this package that talks to a cluster.
type Client struct {
	cs   kubernetes.Interface
	cfg  *rest.Config // for exec, which streams outside the typed client
	poll time.Duration
	exec ExecFunc // tests: in place of the API's exec
}

// Config loads a client configuration: the kubeconfig file at path (with
// context, when not empty, instead of its current one), or, with an
// empty path, the in-cluster service account. The caller decides the
// path (--kubeconfig, $KUBECONFIG, ~/.kube/config): this package reads
// no environment.
func Config(path, context string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	over := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// NewClient connects to the cluster cfg names.
func NewClient(cfg *rest.Config) (*Client, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	return &Client{cs: cs, cfg: cfg, poll: 250 * time.Millisecond}, nil
}

// CreateOptions are the waits of [Client.Create] and a test hook.
type CreateOptions struct {
	// ReadyTimeout bounds each wait for a pod to be Ready (default 2m).
	ReadyTimeout time.Duration
	// Adjust, when set, changes each pod just before it is created
	// (tests: a stand-in image on a cluster that does not hold ours).
	Adjust func(*corev1.Pod)
	// PodAddresses gives each pod its peers' pod addresses (in its host
	// aliases, and in the agent's netguard rules) instead of their
	// Services' ClusterIPs, for clusters where nothing routes a ClusterIP
	// (no kube-proxy, as on this repository's test cluster). Each pod is
	// then mapped only once the pods before it are Ready and have an
	// address. The Services are created all the same.
	PodAddresses bool
}

// Run is what [Client.Create] made: the namespace and the mapped objects
// as created (the Services with their ClusterIPs).
type Run struct {
	Namespace string
	Set       Set
}

// Create makes the run's objects in order: the namespace, its service
// account, the Services
// (whose ClusterIPs the pods need), the NetworkPolicies, the Secrets, the
// pods of every role but the workload, each waited for until Ready, and
// the workload's pod last. On any failure it deletes the namespace again
// before returning the error: a partial run leaves nothing behind.
func (c *Client) Create(ctx context.Context, in Input, o CreateOptions) (run *Run, err error) {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	ns, err := Namespace(in)
	if err != nil {
		return nil, err
	}
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	defer func() {
		if err != nil {
			// A fresh context: the run's may be what was cancelled.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if derr := c.Delete(dctx, ns.Name); derr != nil {
				err = errors.Join(err, fmt.Errorf("rolling back: %w", derr))
			}
		}
	}()
	sa, err := ServiceAccount(in)
	if err != nil {
		return nil, err
	}
	if _, err := c.cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating service account %s: %w", sa.Name, err)
	}
	set, err := c.createObjects(ctx, &in)
	if err != nil {
		return nil, err
	}
	set.Namespace, set.ServiceAccount = ns, sa
	if err := c.createPods(ctx, in, &set, o); err != nil {
		return nil, err
	}
	return &Run{Namespace: ns.Name, Set: set}, nil
}

// createObjects creates the Services, reads their ClusterIPs into in,
// then creates the policies and maps the pods.
func (c *Client) createObjects(ctx context.Context, in *Input) (Set, error) {
	var set Set
	svcs, err := Services(*in)
	if err != nil {
		return Set{}, err
	}
	in.ServiceIPs = map[string]string{}
	for _, s := range svcs {
		got, err := c.cs.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return Set{}, fmt.Errorf("creating service %s: %w", s.Name, err)
		}
		in.ServiceIPs[s.Name] = got.Spec.ClusterIP
		set.Services = append(set.Services, got)
	}
	if set.Policies, err = Policies(*in); err != nil {
		return Set{}, err
	}
	for _, p := range set.Policies {
		if _, err := c.cs.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return Set{}, fmt.Errorf("creating network policy %s: %w", p.Name, err)
		}
	}
	if set.Pods, set.Secrets, err = Pods(*in); err != nil {
		return Set{}, err
	}
	for _, s := range set.Secrets {
		if _, err := c.cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return Set{}, fmt.Errorf("creating secret %s: %w", s.Name, err)
		}
	}
	return set, nil
}

// createPods starts the pods in the plan's order; every pod but the
// workload's must be Ready before the next is created (the agent is
// created once the gateway and the sidecar answer). With
// o.PodAddresses, each pod is mapped again with the addresses of the
// pods already Ready.
func (c *Client) createPods(ctx context.Context, in Input, set *Set, o CreateOptions) error {
	podIPs := map[string]string{} // role -> its pod's address
	for i := range set.Pods {
		if o.PodAddresses {
			p, err := remap(in, *set, podIPs, i)
			if err != nil {
				return err
			}
			set.Pods[i] = p
		}
		p := set.Pods[i]
		if o.Adjust != nil {
			o.Adjust(p)
		}
		if _, err := c.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", p.Name, err)
		}
		if p.Name == PodName(orchestrate.RoleAgent) {
			continue
		}
		if err := c.WaitReady(ctx, p.Namespace, p.Name, o.ReadyTimeout); err != nil {
			return err
		}
		if o.PodAddresses {
			ip, err := c.podIP(ctx, p.Namespace, p.Name)
			if err != nil {
				return err
			}
			podIPs[p.Labels[orchestrate.LabelRole]] = ip
		}
	}
	return nil
}

// remap maps pod i of the set again with, for each Service, the address
// of its role's pod in place of its ClusterIP. Every peer the pod names
// must already have one: the plan starts a role's peers before it.
func remap(in Input, set Set, podIPs map[string]string, i int) (*corev1.Pod, error) {
	// The ClusterIPs stay for the pods after i (mapped here too, unused).
	in.ServiceIPs = map[string]string{}
	byPod := map[string]bool{}
	for _, s := range set.Services {
		in.ServiceIPs[s.Name] = s.Spec.ClusterIP
		if ip, ok := podIPs[s.Labels[orchestrate.LabelRole]]; ok {
			in.ServiceIPs[s.Name], byPod[s.Name] = ip, true
		}
	}
	st := in.Plan.Containers[i]
	for _, h := range st.Hosts {
		if !byPod[h.Name] {
			return nil, fmt.Errorf("mapping pod %s with pod addresses: its peer %s has no ready pod before it", PodName(st.Role), h.Name)
		}
	}
	pods, _, err := Pods(in)
	if err != nil {
		return nil, err
	}
	return pods[i], nil
}

// podIP reads the address of a pod that is Ready.
func (c *Client) podIP(ctx context.Context, ns, name string) (string, error) {
	p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	if p.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s/%s is ready but has no address", ns, name)
	}
	return p.Status.PodIP, nil
}

// WaitReady waits until the pod is Ready. A pod that ends (or whose
// container is waiting on an error that does not clear by itself) fails
// the wait at once, with its reason.
func (c *Client) WaitReady(ctx context.Context, ns, name string, timeout time.Duration) error {
	var last *corev1.Pod
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(tctx, c.poll, true, func(ctx context.Context) (bool, error) {
		p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
		}
		last = p
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s/%s ended (%s) before it was ready: %s", ns, name, p.Status.Phase, why(p))
		}
		if code, ok := mainExited(p); ok {
			// The holder keeps the pod Running; the role itself is gone.
			return false, &ExitedError{Pod: ns + "/" + name, Code: code}
		}
		if msg := stuck(p); msg != "" {
			return false, fmt.Errorf("pod %s/%s cannot start: %s", ns, name, msg)
		}
		return ready(p), nil
	})
	if err != nil && last != nil && tctx.Err() != nil && ctx.Err() == nil {
		// The timeout, whichever call saw it first (the client's rate
		// limiter reports it as an error of its own).
		return fmt.Errorf("pod %s/%s not ready after %s (phase %s: %s): %w", ns, name, timeout, last.Status.Phase, why(last), context.DeadlineExceeded)
	}
	return err
}

// ExitedError is a role whose main container exited before its pod was
// Ready: the role failed to start (its own output says why), which is
// not the cluster's failure.
type ExitedError struct {
	Pod  string // namespace/name
	Code int
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("pod %s: container %s exited with code %d before it was ready", e.Pod, ContainerName, e.Code)
}

// mainExited reports the exit code of the pod's main container once it
// has terminated.
func mainExited(p *corev1.Pod) (int, bool) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == ContainerName && s.State.Terminated != nil {
			return int(s.State.Terminated.ExitCode), true
		}
	}
	return 0, false
}

// WaitDone waits until the pod has ended and returns its main
// container's exit code.
func (c *Client) WaitDone(ctx context.Context, ns, name string, timeout time.Duration) (int, error) {
	code := -1
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(tctx, c.poll, true, func(ctx context.Context) (bool, error) {
		p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
		}
		if msg := stuck(p); msg != "" {
			return false, fmt.Errorf("pod %s/%s cannot start: %s", ns, name, msg)
		}
		if c, ok := mainExited(p); ok {
			code = c
			return true, nil
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s/%s failed before its container ran: %s", ns, name, why(p))
		}
		return false, nil
	})
	if err != nil {
		if tctx.Err() != nil && ctx.Err() == nil {
			// The timeout, whichever call saw it first (the client's
			// rate limiter reports it as an error of its own).
			err = fmt.Errorf("not ended after %s: %w", timeout, context.DeadlineExceeded)
		}
		return -1, fmt.Errorf("waiting for pod %s/%s to end: %w", ns, name, err)
	}
	return code, nil
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stuck names a waiting reason that will not clear by waiting: a missing
// image (nothing is ever pulled), a bad config, a refused sysctl.
func stuck(p *corev1.Pod) string {
	if p.Status.Reason == "SysctlForbidden" || p.Status.Reason == "UnexpectedAdmissionError" {
		return p.Status.Reason + ": " + p.Status.Message
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return s.Name + ": " + w.Reason + ": " + w.Message
			}
		}
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 && isInit(p, s.Name) {
			return fmt.Sprintf("init container %s exited %d: %s", s.Name, t.ExitCode, t.Message)
		}
	}
	return ""
}

func isInit(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func why(p *corev1.Pod) string {
	if p.Status.Reason != "" || p.Status.Message != "" {
		return p.Status.Reason + " " + p.Status.Message
	}
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			return fmt.Sprintf("container %s exited %d (%s)", s.Name, t.ExitCode, t.Reason)
		}
		if w := s.State.Waiting; w != nil {
			return fmt.Sprintf("container %s waiting: %s %s", s.Name, w.Reason, w.Message)
		}
	}
	return "no container status yet"
}

// Logs copies the output of the pod's container to w.
func (c *Client) Logs(ctx context.Context, ns, pod, container string, w io.Writer) error {
	rc, err := c.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("reading logs of %s/%s/%s: %w", ns, pod, container, err)
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("reading logs of %s/%s/%s: %w", ns, pod, container, err)
	}
	return nil
}

// DeleteTimeout bounds how long [Client.Delete] waits for a namespace to
// be gone.
const DeleteTimeout = 2 * time.Minute

// Delete deletes the namespace, with everything in it, and waits until
// the cluster has removed it. A namespace that is already gone is not an
// error.
func (c *Client) Delete(ctx context.Context, ns string) error {
	fg := metav1.DeletePropagationForeground
	zero := int64(0)
	err := c.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &fg, GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	if err := c.untilGone(ctx, ns); err != nil {
		return fmt.Errorf("waiting for namespace %s to be gone: %w", ns, err)
	}
	return nil
}

// Orphan is a run namespace found by its labels.
type Orphan struct {
	Namespace string
	Labels    map[string]string
	Created   time.Time
}

// RunNamespaces lists the namespaces of runs (label mcpsidecar=1) that
// were not kept (mcpsidecar.kept != 1), with their owner labels: gc
// decides, as for Docker resources, which owner is dead. extra narrows
// the selector (tests: mcpsidecar.test=1).
func (c *Client) RunNamespaces(ctx context.Context, extra string) ([]Orphan, error) {
	sel := orchestrate.LabelApp + "=1," + orchestrate.LabelKept + "!=1"
	if extra != "" {
		sel += "," + extra
	}
	list, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing run namespaces (%s): %w", sel, err)
	}
	var out []Orphan
	for _, ns := range list.Items {
		out = append(out, Orphan{Namespace: ns.Name, Labels: ns.Labels, Created: ns.CreationTimestamp.Time})
	}
	return out, nil
}

// Pod reads one pod of a run.
func (c *Client) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	return p, nil
}

// Stop ends a running pod's containers without deleting the pod, so its
// volumes (the output emptyDir) stay until the namespace goes: it sets
// the pod's activeDeadlineSeconds, which makes the kubelet stop the
// containers as a deletion would (SIGTERM, then SIGKILL after the pod's
// grace period) and mark the pod Failed (DeadlineExceeded). Kubernetes
// has no call that stops one container. It returns the main container's
// exit code once it has ended.
func (c *Client) Stop(ctx context.Context, ns, name string, timeout time.Duration) (int, error) {
	patch := []byte(`{"spec":{"activeDeadlineSeconds":1}}`)
	if _, err := c.cs.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return -1, fmt.Errorf("stopping pod %s/%s: %w", ns, name, err)
	}
	return c.WaitDone(ctx, ns, name, timeout)
}

// OutputVolume is the name of the emptyDir volume each role's pod has at
// its output directory; the holder mounts it read-only.
const OutputVolume = outputVolume
