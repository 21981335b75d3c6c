//go:build kube

package e2e

// gc on the Kubernetes backend, against the test cluster of
// scripts/kube-test-cluster.sh (which must be up):
//
//	KUBECONFIG=/var/lib/mcpsidecar-kube/kubeconfig \
//	  go test -count=1 -tags kube -run TestKubeGC ./e2e/
//
// The test makes run namespaces itself, labelled as a run's are, and
// runs the product binary's gc; it needs no Docker.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// kgcHold is a namespace finalizer of this test: a namespace holding it
// stays Terminating once deleted, until the test finalizes it.
const kgcHold = "mcpsidecar.e2e/hold"

// kgcClientset is a clientset on the test cluster (no Docker needed).
func kgcClientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, path := kbConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{Limit: 1}); err != nil {
		t.Fatalf("the cluster of %s does not answer (is scripts/kube-test-cluster.sh up running?): %v", path, err)
	}
	return cs
}

// kgcDeadPID is the pid of a process that has ended on this host.
func kgcDeadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d of an ended process: kill 0 = %v, want ESRCH", pid, err)
	}
	return pid
}

// kgcNamespace creates a run namespace owned by pid on host, labelled
// with the test's id.
func kgcNamespace(t *testing.T, cs kubernetes.Interface, id, name, host string, pid int, finalizers ...corev1.FinalizerName) {
	t.Helper()
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "mcpsidecar-e2egc-" + id + "-" + name, Labels: map[string]string{
			orchestrate.LabelApp: "1", orchestrate.LabelRun: "run-e2egc-" + id + "-" + name,
			orchestrate.LabelHost: host, orchestrate.LabelPID: strconv.Itoa(pid), orchestrate.LabelKept: "0",
			"mcpsidecar.e2e.kube": id,
		}},
		Spec: corev1.NamespaceSpec{Finalizers: finalizers},
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kgcRelease removes the test's finalizer from a namespace, so a
// Terminating one can go; the namespace controller updates it too, so
// a conflict is retried.
func kgcRelease(cs kubernetes.Interface, name string) error {
	ctx := context.Background()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var keep []corev1.FinalizerName
		for _, f := range ns.Spec.Finalizers {
			if f != kgcHold {
				keep = append(keep, f)
			}
		}
		ns.Spec.Finalizers = keep
		_, err = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// kgcCleanup deletes every namespace of the test, released first.
func kgcCleanup(t *testing.T, cs kubernetes.Interface, id string) {
	ctx := context.Background()
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "mcpsidecar.e2e.kube=" + id})
	if err != nil {
		t.Error(err)
		return
	}
	for _, ns := range list.Items {
		if err := kgcRelease(cs, ns.Name); err != nil {
			t.Error(err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
}

func kgcExists(t *testing.T, cs kubernetes.Interface, name string) bool {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// kgcRun runs the product binary's gc on the cluster, with a Docker that
// cannot be reached: gc on this backend must not need it.
func kgcRun(t *testing.T, bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, append([]string{"gc", "--backend", "kubernetes", "--runs-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent/docker.sock")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		t.Logf("gc stderr:\n%s", errb.String())
	}
	return out.String(), err
}

// TestKubeGC: gc --backend kubernetes deletes this host's run namespace
// whose owner is dead and waits for one already Terminating, and leaves
// the namespace of a live owner (this test) and of another host; a
// second gc finds nothing of the test's to remove.
func TestKubeGC(t *testing.T) {
	cs := kgcClientset(t)
	bin := kbBinary(t) // built first: the held namespace's release is timed from gc's start
	id, host, dead := kbID(), mustHostname(t), kgcDeadPID(t)
	name := func(s string) string { return "mcpsidecar-e2egc-" + id + "-" + s }
	t.Cleanup(func() { kgcCleanup(t, cs, id) })
	kgcNamespace(t, cs, id, "dead", host, dead)
	kgcNamespace(t, cs, id, "held", host, dead, kgcHold)
	kgcNamespace(t, cs, id, "live", host, os.Getpid())
	kgcNamespace(t, cs, id, "other", "another-host."+id, dead)
	ctx := context.Background()
	if err := cs.CoreV1().Namespaces().Delete(ctx, name("held"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// gc lists the held namespace Terminating and waits for it; it goes
	// once released, while gc waits for the dead one's deletion.
	release := time.AfterFunc(2*time.Second, func() {
		if err := kgcRelease(cs, name("held")); err != nil {
			t.Errorf("releasing %s: %v", name("held"), err)
		}
	})
	defer release.Stop()

	start := time.Now()
	out, err := kgcRun(t, bin)
	t.Logf("gc took %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("gc: %v\n%s", err, out)
	}
	for _, line := range []string{
		"removed namespace " + name("dead") + " (run run-e2egc-" + id + "-dead)\n",
		"removed namespace " + name("held") + " (run run-e2egc-" + id + "-held; it was already being deleted)\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("gc output lacks %q", line)
		}
	}
	for s, want := range map[string]bool{"dead": false, "held": false, "live": true, "other": true} {
		if got := kgcExists(t, cs, name(s)); got != want {
			t.Errorf("namespace %s there after gc: %v, want %v", name(s), got, want)
		}
	}

	out, err = kgcRun(t, bin, "--json")
	if err != nil {
		t.Fatalf("gc --json: %v\n%s", err, out)
	}
	var doc struct {
		Schema     string `json:"schema"`
		Namespaces []struct {
			Name string `json:"name"`
		} `json:"namespaces"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Schema != "mcpsidecar.gc/v1" {
		t.Fatalf("gc --json: schema %q (%v):\n%s", doc.Schema, err, out)
	}
	for _, ns := range doc.Namespaces {
		if strings.Contains(ns.Name, id) {
			t.Errorf("the second gc removed %s", ns.Name)
		}
	}
}

func mustHostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
