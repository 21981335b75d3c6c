//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// EnvKubeState is the test cluster's state directory (the script's
// MCPSIDECAR_KUBE_STATE): its containerd socket takes our image, its
// kubelet's seccomp root our profile.
const EnvKubeState = "MCPSIDECAR_KUBE_STATE"

func kubeState() string {
	if v := os.Getenv(EnvKubeState); v != "" {
		return v
	}
	return "/var/lib/mcpsidecar-kube"
}

// importRuntimeImage builds a FROM scratch image holding this tree's
// binary (the netguard role) and imports it into the test cluster's
// containerd, as the Kubernetes backend's tests bring images to a node.
func importRuntimeImage(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(kubeState(), "containerd", "containerd.sock")
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the test cluster's containerd socket %s is missing (scripts/kube-test-cluster.sh up; or set %s): %v", sock, EnvKubeState, err)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "mcpsidecar"), "github.com/mcpsidecar/mcpsidecar/cmd/mcpsidecar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the binary: %v: %s", err, out)
	}
	df := "FROM scratch\nCOPY mcpsidecar /mcpsidecar\nUSER 65532:65532\nENTRYPOINT [\"/mcpsidecar\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("localhost/mcpsidecar-kube-netguard-test:%d", os.Getpid())
	t.Cleanup(func() {
		_ = exec.Command("docker", "rmi", "-f", tag).Run()
		_ = exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "rm", tag).Run()
	})
	run := func(name string, args ...string) {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
	}
	run("docker", "build", "-q", "-t", tag, dir)
	tar := filepath.Join(dir, "image.tar")
	run("docker", "save", "-o", tar, tag)
	run("ctr", "--address", sock, "-n", "k8s.io", "images", "import", tar)
	return tag
}

// installSeccomp writes the plan's seccomp profile where the test
// kubelet reads Localhost profiles, and removes it afterwards.
func installSeccomp(t *testing.T, in Input) {
	t.Helper()
	root := filepath.Join(kubeState(), "kubelet", "seccomp")
	prof := in.Plan.Containers[0].Spec.Seccomp
	if prof == "" {
		t.Fatal("the plan has no seccomp profile")
	}
	path := filepath.Join(root, SeccompDir, SeccompFile(prof))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	if err := os.WriteFile(path, []byte(prof), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNetguardInPod runs the agent pod's netguard init container for real
// (our binary, our seccomp profile as Localhost, NET_ADMIN in the init
// container only) and checks from the agent container what it holds,
// on a cluster that enforces no NetworkPolicy:
//   - control: the same agent pod without netguard reaches the gateway
//     pod's port (the policies are not enforced here);
//   - with netguard, the gateway's pod address is dropped;
//   - with netguard, the sidecar's allowed address and port connects.
//
// The test cluster has no kube-proxy, so ClusterIPs do not route: the
// mapping is given the pods' own addresses as the service addresses (what
// kube-proxy's DNAT would lead to); the rules are the same.
func TestNetguardInPod(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	image := importRuntimeImage(t)
	in := clusterInput(t, "default", orchestrate.WorkloadAgent)
	in.RuntimeImage = image
	installSeccomp(t, in)
	ns := in.NamespaceName()
	deleteAtEnd(t, c, ns)

	nsObj, err := Namespace(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := ServiceAccount(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Gateway and sidecar (stand-ins serving their ports), mapped with
	// placeholder service addresses: their own host aliases are not used.
	in.ServiceIPs = map[string]string{spec.GatewayAlias: "192.0.2.1", spec.SidecarAlias: "192.0.2.2"}
	pods, secrets, err := Pods(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if _, err := c.cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	adjust := dropUnsafeSysctls(t, standIn(t, testImage()))
	for _, p := range pods[:2] {
		adjust(p)
		if _, err := c.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, ns, p.Name, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		got, err := c.cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ips[p.Name] = got.Status.PodIP
	}
	gw, sc := ips[PodName(orchestrate.RoleGateway)], ips[PodName(orchestrate.RoleSidecar)]
	t.Logf("gateway pod %s, sidecar pod %s", gw, sc)

	// The agent's netguard allows the sidecar's address; the gateway's
	// service address is one no pod has.
	in.ServiceIPs = map[string]string{spec.GatewayAlias: "192.0.2.1", spec.SidecarAlias: sc}
	for _, tt := range []struct {
		name     string
		guard    bool
		dial     string
		wantExit int
	}{
		{"agent-control", false, gw + ":3128", 0},
		{"agent-denied", true, gw + ":3128", 1},
		{"agent-allowed", true, sc + ":8000", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pods, _, err := Pods(in)
			if err != nil {
				t.Fatal(err)
			}
			p := pods[len(pods)-1]
			p.Name = tt.name
			dropUnsafeSysctls(t, func(*corev1.Pod) {})(p)
			p.Spec.Containers[0].Image, p.Spec.Containers[0].Command = testImage(), nil
			p.Spec.Containers[0].Args = []string{"dial", tt.dial}
			if !tt.guard {
				p.Spec.InitContainers = nil
			} else if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Image != image {
				t.Fatalf("agent pod init containers = %+v, want netguard with %s", p.Spec.InitContainers, image)
			}
			if _, err := c.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			code, err := c.WaitDone(ctx, ns, p.Name, 90*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var log, ngLog strings.Builder
			_ = c.Logs(ctx, ns, p.Name, ContainerName, &log)
			if tt.guard {
				if err := c.Logs(ctx, ns, p.Name, NetguardContainer, &ngLog); err != nil {
					t.Error(err)
				}
			}
			t.Logf("exit %d; agent: %s; netguard: %s", code, strings.TrimSpace(log.String()), strings.TrimSpace(ngLog.String()))
			if code != tt.wantExit {
				t.Errorf("dial %s exited %d, want %d", tt.dial, code, tt.wantExit)
			}
		})
	}
}
