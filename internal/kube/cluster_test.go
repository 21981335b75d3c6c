//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// These tests run against a real kube-apiserver, etcd, controller-manager,
// scheduler and kubelet: scripts/kube-test-cluster.sh up, then
//
//	KUBECONFIG=<the path it prints> go test -tags kube ./internal/kube/
//
// They fail, never skip, when the cluster is missing. Everything they
// create is in namespaces labelled mcpsidecar.test=1 and is deleted by a
// cleanup registered before it is created.

// EnvTestImage names the stand-in image the role pods run on the test
// cluster (ours is not there unless imported); the default is the
// cluster script's nettest image.
const EnvTestImage = "MCPSIDECAR_KUBE_TEST_IMAGE"

const defaultTestImage = "localhost/mcpsidecar-kube-nettest:1"

func testClient(t *testing.T) *Client {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		t.Fatal("KUBECONFIG is not set: start the test cluster (sudo scripts/kube-test-cluster.sh up) and set KUBECONFIG to the kubeconfig it prints")
	}
	cfg, err := Config(path, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("the cluster of %s does not answer (is scripts/kube-test-cluster.sh up running?): %v", path, err)
	}
	return c
}

// clusterInput is input's mapping with a namespace of its own per test
// and the test label.
func clusterInput(t *testing.T, specName string, w orchestrate.Workload) Input {
	in := input(t, specName, w)
	in.Token = fmt.Sprintf("t%d", time.Now().UnixNano()%1_000_000_000)
	for i := range in.Plan.Containers {
		in.Plan.Containers[i].Spec.Labels["mcpsidecar.test"] = "1"
	}
	return in
}

func deleteAtEnd(t *testing.T, c *Client, ns string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), DeleteTimeout)
		defer cancel()
		if err := c.Delete(ctx, ns); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// TestMappingAcceptedByAPIServer sends every golden object set to the API
// server (the namespace for real, the rest as a server-side dry run), so
// the mapping is checked by Kubernetes' own validation: dnsPolicy None
// with the plan's nameserver, the host aliases, the image volume, the
// sysctl names, the seccomp paths, the policies' selectors and blocks.
func TestMappingAcceptedByAPIServer(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	for _, tt := range []struct {
		spec string
		w    orchestrate.Workload
	}{
		{"default", orchestrate.WorkloadAgent}, {"shell_access", orchestrate.WorkloadAgent},
		{"workload", orchestrate.WorkloadAgent}, {"mcp_servers", orchestrate.WorkloadAgent},
		{"ports", orchestrate.WorkloadAgent}, {"no_network", orchestrate.WorkloadAgent},
		{"default", orchestrate.WorkloadProbe},
	} {
		t.Run(tt.spec+"/"+string(tt.w), func(t *testing.T) {
			in := clusterInput(t, tt.spec, tt.w)
			set, err := Objects(in)
			if err != nil {
				t.Fatal(err)
			}
			deleteAtEnd(t, c, set.Namespace.Name)
			if _, err := c.cs.CoreV1().Namespaces().Create(ctx, set.Namespace, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.cs.CoreV1().ServiceAccounts(ns(set)).Create(ctx, set.ServiceAccount, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
			for _, s := range set.Secrets {
				if _, err := c.cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, dry); err != nil {
					t.Errorf("secret %s: %v", s.Name, err)
				}
			}
			for _, s := range set.Services {
				if _, err := c.cs.CoreV1().Services(s.Namespace).Create(ctx, s, dry); err != nil {
					t.Errorf("service %s: %v", s.Name, err)
				}
			}
			for _, p := range set.Policies {
				if _, err := c.cs.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, dry); err != nil {
					t.Errorf("network policy %s: %v", p.Name, err)
				}
			}
			for _, p := range set.Pods {
				if _, err := c.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, dry); err != nil {
					t.Errorf("pod %s: %v", p.Name, err)
				}
			}
		})
	}
}

// standIn makes a mapped pod runnable on the test cluster without our
// image: the stand-in serves the role's ports (or, for the agent, checks
// its routes and exits), with a TCP readiness check. Every security field
// of the mapping stays. What it changes is printed in the test log.
func standIn(t *testing.T, image string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Image, c.Command = image, nil
		switch {
		case c.ReadinessProbe != nil:
			port := c.ReadinessProbe.HTTPGet.Port
			c.Args = []string{"serve", ":" + port.String()}
			c.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}
		default:
			c.Args = []string{"routes", "-"}
		}
		p.Spec.InitContainers = nil
		t.Logf("pod %s: stand-in image %s, args %q, no init container", p.Name, image, c.Args)
	}
}

func testImage() string {
	if v := os.Getenv(EnvTestImage); v != "" {
		return v
	}
	return defaultTestImage
}

// TestCreateTeardown creates a run's objects in order on the cluster,
// waits for the gateway and the sidecar, lets the agent end, reads its
// log, finds the namespace by its labels, deletes it and checks that it
// is gone.
func TestCreateTeardown(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	in := clusterInput(t, "default", orchestrate.WorkloadAgent)
	in.RuntimeDefaultSeccomp = true
	ns := in.NamespaceName()
	deleteAtEnd(t, c, ns)

	start := time.Now()
	run, err := c.Create(ctx, in, CreateOptions{ReadyTimeout: 90 * time.Second, Adjust: dropUnsafeSysctls(t, standIn(t, testImage()))})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("created and ready (gateway, sidecar) in %s", time.Since(start).Round(time.Millisecond))
	for _, s := range run.Set.Services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
			t.Errorf("service %s has no ClusterIP", s.Name)
		}
	}
	code, err := c.WaitDone(ctx, ns, PodName(orchestrate.RoleAgent), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if err := c.Logs(ctx, ns, PodName(orchestrate.RoleAgent), ContainerName, &log); err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Errorf("agent exited %d, want 0; log:\n%s", code, log.String())
	}
	if log.Len() == 0 {
		t.Error("agent log is empty")
	}

	found, err := c.RunNamespaces(ctx, "mcpsidecar.test=1")
	if err != nil {
		t.Fatal(err)
	}
	if !hasNamespace(found, ns) {
		t.Errorf("RunNamespaces does not list %s: %v", ns, found)
	}
	start = time.Now()
	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Logf("namespace deleted and gone in %s", time.Since(start).Round(time.Millisecond))
	found, err = c.RunNamespaces(ctx, "mcpsidecar.test=1")
	if err != nil {
		t.Fatal(err)
	}
	if hasNamespace(found, ns) {
		t.Errorf("%s still listed after Delete", ns)
	}
}

// TestCreateRollsBack: a pod that cannot start (an image the node does
// not hold; nothing is ever pulled) fails Create with the reason, and the
// namespace is gone afterwards.
func TestCreateRollsBack(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	in := clusterInput(t, "default", orchestrate.WorkloadAgent)
	in.RuntimeDefaultSeccomp = true
	ns := in.NamespaceName()
	deleteAtEnd(t, c, ns)
	adjust := func(p *corev1.Pod) {
		standIn(t, testImage())(p)
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
		if p.Name == PodName(orchestrate.RoleSidecar) {
			p.Spec.Containers[0].Image = "localhost/mcpsidecar-kube-missing:1"
		}
	}
	_, err := c.Create(ctx, in, CreateOptions{ReadyTimeout: time.Minute, Adjust: dropUnsafeSysctls(t, adjust)})
	if err == nil || !strings.Contains(err.Error(), "sidecar") {
		t.Fatalf("Create = %v, want an error naming the sidecar pod", err)
	}
	t.Logf("Create failed as expected: %v", err)
	if _, err := c.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s still exists after the failed Create", ns)
	}
}

func ns(s Set) string { return s.Namespace.Name }

func hasNamespace(list []Orphan, ns string) bool {
	for _, o := range list {
		if o.Namespace == ns {
			return true
		}
	}
	return false
}

// EnvUnsafeSysctls, set to 1, says the test cluster's kubelet allows the
// mapping's unsafe sysctl (allowedUnsafeSysctls: [net.ipv4.tcp_fastopen]);
// otherwise the tests drop it from the pods, and say so, because the
// kubelet would refuse them (SysctlForbidden).
const EnvUnsafeSysctls = "MCPSIDECAR_KUBE_UNSAFE_SYSCTLS"

func dropUnsafeSysctls(t *testing.T, next func(*corev1.Pod)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		next(p)
		if os.Getenv(EnvUnsafeSysctls) == "1" {
			return
		}
		sc := p.Spec.SecurityContext
		var kept []corev1.Sysctl
		for _, s := range sc.Sysctls {
			if s.Name == "net.ipv4.tcp_fastopen" {
				t.Logf("pod %s: sysctl %s dropped (the test kubelet does not allow it; set %s=1 when it does)", p.Name, s.Name, EnvUnsafeSysctls)
				continue
			}
			kept = append(kept, s)
		}
		sc.Sysctls = kept
	}
}
