//go:build docker && kube

package e2e

// The conformance suite (conformance_test.go) on the Kubernetes backend,
// against the test cluster of scripts/kube-test-cluster.sh, run the way
// scripts/test-kube.sh runs the kube e2e tests:
//
//	make testbin
//	KUBECONFIG=/var/lib/mcpsidecar-kube/kubeconfig MCPSIDECAR_ALLOW_OLD_ENGINE=1 \
//	  MCPSIDECAR_BIN=$PWD/bin/mcpsidecar-test \
//	  go test -count=1 -tags docker,kube -run '^TestKubeConformance' ./e2e/
//
// Docker builds our image; it is imported into the node's containerd,
// our seccomp profile installed on the node, and the roles addressed by
// pod address, as in kube_test.go. A run is one namespace, found by the
// test's label.

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

// kubeUnderTest is the Kubernetes backend on the test cluster.
func kubeUnderTest(t *testing.T) backendUnderTest {
	kbClient(t) // fails early, with the hint, without a cluster or Docker
	cs := kgcClientset(t)
	state := kbState()
	list := func(t *testing.T, id string) []string {
		t.Helper()
		l, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: "mcpsidecar.e2e=" + id})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ns := range l.Items {
			out = append(out, "namespace "+ns.Name)
		}
		slices.Sort(out)
		return out
	}
	return backendUnderTest{
		name: "kubernetes",
		flags: []string{"--backend", "kubernetes",
			"--kube-image-import", "containerd:" + filepath.Join(state, "containerd", "containerd.sock"),
			"--kube-node-root", filepath.Join(state, "kubelet"), "--kube-pod-addresses"},
		gcFlags:   []string{"--backend", "kubernetes"},
		leftovers: list,
		cleanup: func(t *testing.T, id string) {
			t.Cleanup(func() {
				ctx := context.Background()
				l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "mcpsidecar.e2e=" + id})
				if err != nil {
					t.Error(err)
					return
				}
				for _, ns := range l.Items {
					if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						t.Error(err)
					}
				}
			})
		},
		// The pods phase ends once the agent's pod is created.
		running:     regexp.MustCompile(`\[pods\s*\]\s+[0-9.]+ ms\s+ok`),
		objects:     1,
		startWait:   3 * time.Minute,
		endWait:     3 * time.Minute,
		phases:      []string{"spec", "preflight", "image", "run-dir", "kube-image", "pods", "wait", "collect", "teardown"},
		recordOnly:  map[string]string{},
		recordLacks: map[string]string{},
		// The gateway's pod stays Running when its main container exits
		// (the holder container keeps it); kube.Client.WaitReady sees
		// the exit at once and Apply ends with it, exit 1 as on Docker.
		// The gateway's own output is not shown in the error (Docker
		// shows it): a difference, not yet closed.
		gatewayFails: startFailure{code: exitcode.Runtime, says: []string{"/gateway: container main exited with code 2 before it was ready"}},
		// The workload is stopped with its namespace; its exit code is
		// never read.
		timedOutExit: "none",
		refuses: map[string]refusal{
			"keep": {reason: "a kept run's namespace is not supported yet (docs/kubernetes.md, \"Not done yet\")",
				args: []string{"--keep"}, message: "--keep is not supported with --backend kubernetes yet"},
		},
	}
}

func TestKubeConformance(t *testing.T) {
	NeedDocker(t)
	runConformance(t, kubeUnderTest(t))
}
