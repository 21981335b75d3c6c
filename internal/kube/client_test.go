package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// fakeCluster is client-go's fake clientset with what a control plane
// would add: ClusterIPs for Services, and a kubelet that gives each pod an
// address and makes it
// Ready (or Failed, for the roles in fail) as it is created. It records
// the order of creations.
func fakeCluster(t *testing.T, fail ...string) (*Client, *[]string) {
	cs := fake.NewClientset()
	var order []string
	next := 10
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		m, _ := obj.(metav1.Object)
		order = append(order, a.GetResource().Resource+"/"+m.GetName())
		switch o := obj.(type) {
		case *corev1.Service:
			o.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", next)
			next++
		case *corev1.Pod:
			o.Status.Phase, o.Status.PodIP = corev1.PodRunning, fmt.Sprintf("10.244.0.%d", next)
			next++
			o.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if slices.Contains(fail, o.Name) {
				o.Status.Phase, o.Status.Conditions = corev1.PodFailed, nil
				o.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
			}
		}
		return false, nil, nil // the default tracker stores it
	})
	return &Client{cs: cs, poll: time.Millisecond}, &order
}

func TestCreateOrder(t *testing.T) {
	c, order := fakeCluster(t)
	in := input(t, "default", orchestrate.WorkloadAgent)
	in.ServiceIPs = nil // Create fills them from the Services it makes
	run, err := c.Create(context.Background(), in, CreateOptions{ReadyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"namespaces/" + in.NamespaceName(), "serviceaccounts/sandbox",
		"services/egress-gateway", "services/mcp-sidecar",
		"networkpolicies/default-deny", "networkpolicies/gateway", "networkpolicies/sidecar", "networkpolicies/agent",
		"secrets/agent-env",
		"pods/gateway", "pods/sidecar", "pods/agent",
	}
	if !slices.Equal(*order, want) {
		t.Errorf("creation order:\n got %v\nwant %v", *order, want)
	}
	agent := run.Set.Pods[2]
	if got := agent.Spec.InitContainers[0].Args; !slices.Equal(got, []string{"netguard", "--allow", "10.96.0.10:3128", "--allow", "10.96.0.10:3129", "--allow", "10.96.0.11:8000"}) {
		t.Errorf("netguard args %v do not name the created ClusterIPs", got)
	}
}

// TestCreatePodAddresses: with PodAddresses, the sidecar's host alias
// names the gateway pod's address, and the agent's aliases and netguard
// rules the gateway's and the sidecar's pods, not the ClusterIPs that
// nothing routes without kube-proxy.
func TestCreatePodAddresses(t *testing.T) {
	c, _ := fakeCluster(t)
	in := input(t, "default", orchestrate.WorkloadAgent)
	in.ServiceIPs = nil
	run, err := c.Create(context.Background(), in, CreateOptions{ReadyTimeout: time.Second, PodAddresses: true})
	if err != nil {
		t.Fatal(err)
	}
	// Services get 10.96.0.10 and .11; the pods 10.244.0.12 (gateway),
	// .13 (sidecar), .14 (agent).
	aliases := func(p *corev1.Pod) []string {
		var out []string
		for _, h := range p.Spec.HostAliases {
			if !strings.HasPrefix(h.IP, "0.") {
				out = append(out, h.IP+"="+strings.Join(h.Hostnames, ","))
			}
		}
		return out
	}
	sidecar, agent := run.Set.Pods[1], run.Set.Pods[2]
	if got, want := aliases(sidecar), []string{"10.244.0.12=egress-gateway"}; !slices.Equal(got, want) {
		t.Errorf("sidecar host aliases %v, want %v", got, want)
	}
	if got, want := aliases(agent), []string{"10.244.0.12=egress-gateway", "10.244.0.13=mcp-sidecar"}; !slices.Equal(got, want) {
		t.Errorf("agent host aliases %v, want %v", got, want)
	}
	want := []string{"netguard", "--allow", "10.244.0.12:3128", "--allow", "10.244.0.12:3129", "--allow", "10.244.0.13:8000"}
	if got := agent.Spec.InitContainers[0].Args; !slices.Equal(got, want) {
		t.Errorf("netguard args %v, want %v", got, want)
	}
	stored, err := c.cs.CoreV1().Pods(run.Namespace).Get(context.Background(), "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Spec.InitContainers[0].Args; !slices.Equal(got, want) {
		t.Errorf("created agent pod's netguard args %v, want %v", got, want)
	}
}

// TestCreateRollsBackOnFailedPod: a pod that ends before it is Ready
// fails Create with the pod's reason, nothing after it is created, and
// the namespace is deleted.
func TestCreateRollsBackOnFailedPod(t *testing.T) {
	c, order := fakeCluster(t, "sidecar")
	in := input(t, "default", orchestrate.WorkloadAgent)
	_, err := c.Create(context.Background(), in, CreateOptions{ReadyTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "pod "+in.NamespaceName()+"/sidecar ended (Failed)") {
		t.Fatalf("Create = %v, want the sidecar's failure", err)
	}
	if slices.Contains(*order, "pods/agent") {
		t.Error("the agent was created after the sidecar failed")
	}
	if _, err := c.cs.CoreV1().Namespaces().Get(context.Background(), in.NamespaceName(), metav1.GetOptions{}); err == nil {
		t.Error("the namespace is still there after the failed Create")
	}
}

func TestRunNamespacesSelector(t *testing.T) {
	c, _ := fakeCluster(t)
	ctx := context.Background()
	mk := func(name string, l map[string]string) {
		if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("run-a", map[string]string{orchestrate.LabelApp: "1", orchestrate.LabelKept: "0"})
	mk("run-kept", map[string]string{orchestrate.LabelApp: "1", orchestrate.LabelKept: "1"})
	mk("other", map[string]string{"team": "x"})
	got, err := c.RunNamespaces(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Namespace != "run-a" {
		t.Errorf("RunNamespaces = %+v, want run-a only", got)
	}
}

func TestContainerdName(t *testing.T) {
	for in, want := range map[string]string{
		"mcpsidecar:0123":        "docker.io/library/mcpsidecar:0123",
		"team/img:1":             "docker.io/team/img:1",
		"localhost/p:1":          "localhost/p:1",
		"reg.example:5000/x/y:2": "reg.example:5000/x/y:2",
	} {
		if got := containerdName(in); got != want {
			t.Errorf("containerdName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWaitReadyRoleExited: a role whose main container exited while the
// holder keeps its pod Running fails at once with its exit code (an
// ExitedError: the role failed, not the cluster), not at the ready
// timeout (found by the backend conformance suite: a gateway that could
// not start was noticed only after --ready-timeout, as the client's rate
// limiter's error).
func TestWaitReadyRoleExited(t *testing.T) {
	c, _ := fakeCluster(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gateway"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}},
			{Name: HolderContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}}}
	if _, err := c.cs.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The fake kubelet made it Ready; the role has exited instead.
	pod.Status.Conditions = nil
	if _, err := c.cs.CoreV1().Pods("ns").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := c.WaitReady(context.Background(), "ns", "gateway", time.Minute)
	var exited *ExitedError
	if !errors.As(err, &exited) || exited.Code != 2 || !strings.Contains(err.Error(), "ns/gateway: container main exited with code 2") {
		t.Fatalf("WaitReady = %v, want the gateway's exit 2", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("WaitReady took %s: the exit was noticed at the timeout, not at once", d)
	}
}

// TestWaitReadyTimeout: a pod that never becomes Ready fails at the
// timeout with its last state, however the poll saw the deadline.
func TestWaitReadyTimeout(t *testing.T) {
	c, _ := fakeCluster(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sidecar"}}
	if _, err := c.cs.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	if _, err := c.cs.CoreV1().Pods("ns").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := c.WaitReady(context.Background(), "ns", "sidecar", 50*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "pod ns/sidecar not ready after 50ms (phase Pending") {
		t.Fatalf("WaitReady = %v, want not ready after 50ms", err)
	}
}
