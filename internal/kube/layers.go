package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/kube/layercheck"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// The network isolation of the agent on a cluster has two layers
// (docs/kubernetes.md): the run's NetworkPolicies, which only a network
// plugin that enforces them makes real, and the agent pod's own rules
// (netguard), which hold whatever the plugin. CheckLayers measures both on
// the cluster the run is on, with three short-lived pods in the run's
// namespace: a target that listens on a port no policy opens, and two
// pods that carry the agent's labels (so every policy that selects the
// agent selects them) and dial it, one without the agent's rules and one
// with them (the agent pod's own netguard init container). The first is
// the unhardened control: it connecting proves the policy layer is not
// enforced here; the second connecting would mean the pod's own rules
// failed, which is an isolation violation.

// Layer pods and the hidden command of our binary they run (internal/cli).
const (
	LayerCommand  = layercheck.Command
	layerTarget   = "layer-target"
	layerBare     = "layer-bare"
	layerGuarded  = "layer-guarded"
	layerRole     = "layer-target" // a role no policy and no Service selects
	layerPort     = 18080
	layerDialWait = 3 * time.Second

	LayerNetworkPolicy = "networkpolicy"
	LayerPodRules      = "pod-rules"
)

// Layer is one isolation layer's measured state.
type Layer struct {
	Name string `json:"name"` // "networkpolicy" or "pod-rules"
	// Holds: the connection the layer must refuse was refused.
	Holds bool `json:"holds"`
	// State is what a person reads: "enforced", "not enforced", "held",
	// "failed".
	State    string `json:"state"`
	Evidence string `json:"evidence"`
}

// Layers is the result of CheckLayers, written to the run directory.
type Layers struct {
	Target string  `json:"target"` // the address both pods dialled
	Layers []Layer `json:"layers"`
}

// DialResult is what `mcpsidecar kube-layer dial` prints, one JSON line
// (internal/kube/layercheck).
type DialResult = layercheck.DialResult

// CheckLayers measures the two layers in the run's namespace. image is our
// runtime image (the layer pods run its hidden kube-layer command); the
// pods are deleted again before it returns (and with the namespace in any
// case).
func (c *Client) CheckLayers(ctx context.Context, run *Run, image string, timeout time.Duration) (Layers, error) {
	agent := run.Set.pod(PodName(orchestrate.RoleAgent))
	if agent == nil {
		return Layers{}, fmt.Errorf("checking the isolation layers: the run has no agent pod")
	}
	pods := c.cs.CoreV1().Pods(run.Namespace)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		zero := int64(0)
		for _, n := range []string{layerBare, layerGuarded, layerTarget} {
			_ = pods.Delete(dctx, n, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}()
	target := layerPod(agent, layerTarget, image, []string{LayerCommand, "listen", "--port", strconv.Itoa(layerPort)}, false)
	target.Labels[orchestrate.LabelRole] = layerRole
	target.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(layerPort)}}}
	if _, err := pods.Create(ctx, target, metav1.CreateOptions{}); err != nil {
		return Layers{}, fmt.Errorf("checking the isolation layers: creating pod %s: %w", layerTarget, err)
	}
	if err := c.WaitReady(ctx, run.Namespace, layerTarget, timeout); err != nil {
		return Layers{}, fmt.Errorf("checking the isolation layers: %w", err)
	}
	ip, err := c.podIP(ctx, run.Namespace, layerTarget)
	if err != nil {
		return Layers{}, err
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(layerPort))
	dial := []string{LayerCommand, "dial", addr, "--timeout", layerDialWait.String()}
	res := map[string]DialResult{}
	for _, name := range []string{layerBare, layerGuarded} {
		if _, err := pods.Create(ctx, layerPod(agent, name, image, dial, name == layerGuarded), metav1.CreateOptions{}); err != nil {
			return Layers{}, fmt.Errorf("checking the isolation layers: creating pod %s: %w", name, err)
		}
	}
	for _, name := range []string{layerBare, layerGuarded} {
		if code, err := c.WaitDone(ctx, run.Namespace, name, timeout); err != nil {
			return Layers{}, fmt.Errorf("checking the isolation layers: %w", err)
		} else if code != 0 {
			return Layers{}, fmt.Errorf("checking the isolation layers: pod %s exited %d", name, code)
		}
		var out bytes.Buffer
		if err := c.Logs(ctx, run.Namespace, name, ContainerName, &out); err != nil {
			return Layers{}, err
		}
		r, err := parseDial(out.Bytes())
		if err != nil {
			return Layers{}, fmt.Errorf("checking the isolation layers: pod %s: %w", name, err)
		}
		res[name] = r
	}
	return judgeLayers(addr, res[layerBare], res[layerGuarded]), nil
}

// parseDial reads the last JSON line of a dial pod's log (the API merges
// its streams; the command prints exactly one).
func parseDial(b []byte) (DialResult, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var r DialResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || r.Address == "" {
		return DialResult{}, fmt.Errorf("no dial result in its log %q", b)
	}
	return r, nil
}

// judgeLayers turns the two dials into the layers' states.
func judgeLayers(addr string, bare, guarded DialResult) Layers {
	np := Layer{Name: LayerNetworkPolicy, Holds: !bare.Connected, State: "enforced",
		Evidence: fmt.Sprintf("a pod with the agent's labels and no pod rules could not connect to %s, which no policy opens (%s)", addr, bare.Error)}
	if bare.Connected {
		np.State = "not enforced"
		np.Evidence = fmt.Sprintf("a pod with the agent's labels and no pod rules connected to %s, which no policy opens: the cluster's network plugin does not enforce NetworkPolicies", addr)
	}
	pr := Layer{Name: LayerPodRules, Holds: !guarded.Connected, State: "held",
		Evidence: fmt.Sprintf("a pod with the agent's labels and its netguard rules could not connect to %s (%s)", addr, guarded.Error)}
	if guarded.Connected {
		pr.State = "failed"
		pr.Evidence = fmt.Sprintf("a pod with the agent's labels and its netguard rules connected to %s: the agent pod's own rules do not hold", addr)
	}
	return Layers{Target: addr, Layers: []Layer{np, pr}}
}

// layerLimit bounds each layer pod: they only listen or dial once.
var layerLimit = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}

// layerPod is a pod like the agent's (its labels, service account,
// security contexts, DNS and host entries) that runs our image's hidden
// command; guarded keeps the agent's init containers (netguard). It holds
// no env, no volume and no second container.
func layerPod(agent *corev1.Pod, name, image string, args []string, guarded bool) *corev1.Pod {
	p := agent.DeepCopy()
	p.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: agent.Namespace, Labels: map[string]string{}}
	for k, v := range agent.Labels {
		p.Labels[k] = v
	}
	p.Status = corev1.PodStatus{}
	p.Spec.Volumes = nil
	main := p.Spec.Containers[0]
	p.Spec.Containers = []corev1.Container{{
		Name: ContainerName, Image: image, Args: args, ImagePullPolicy: corev1.PullIfNotPresent,
		SecurityContext: main.SecurityContext, Resources: corev1.ResourceRequirements{Limits: layerLimit, Requests: layerLimit},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}}
	if !guarded {
		p.Spec.InitContainers = nil
	}
	grace := int64(1)
	p.Spec.TerminationGracePeriodSeconds = &grace
	return p
}

// pod finds a pod of the set by name.
func (s Set) pod(name string) *corev1.Pod {
	for _, p := range s.Pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}
