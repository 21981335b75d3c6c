//go:build kube

package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestExecOnCluster runs the backend's exec path against the test
// cluster's API server and kubelet (v1.37.2), with our real image: a pod
// whose main container and holder both run our hold command. The read
// command, through WebSocket alone, SPDY alone and the fallback the
// backend uses, returns the image's /etc/passwd as a one-entry tar; the
// stop command ends the main container with code 0 through the API
// (StopMain, not killed), and the holder keeps the pod running and still
// answers a read afterwards.
func TestExecOnCluster(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	image := realImage(t)
	name := fmt.Sprintf("mcpsidecar-exec-test-%d", os.Getpid())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{orchestrate.LabelApp: "1", "mcpsidecar.test": "1"}}}
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, c, name)
	sc := &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532)), RunAsGroup: ptr(int64(65532)),
		ReadOnlyRootFilesystem: ptr(true), AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	holder := corev1.Container{Name: HolderContainer, Image: image, Command: HolderArgs(), ImagePullPolicy: corev1.PullNever, SecurityContext: sc}
	main := holder
	main.Name = ContainerName
	grace := int64(5)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{main, holder}, RestartPolicy: corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr(false), TerminationGracePeriodSeconds: &grace}}
	if _, err := c.cs.CoreV1().Pods(name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx, name, "svc", 90*time.Second); err != nil {
		t.Fatal(err)
	}
	read := func(t *testing.T, run ExecFunc) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, name, "svc", HolderContainer, ReadArgs("/etc", 1<<20, []string{"passwd"}), &out, &errb); err != nil {
			t.Fatalf("%v (stderr %q)", err, errb.String())
		}
		tr := tar.NewReader(&out)
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("reading the tar: %v (stderr %q)", err, errb.String())
		}
		b, _ := io.ReadAll(tr)
		if h.Name != "passwd" || string(b) != spec.Passwd {
			t.Errorf("entry %q = %q, want the image's passwd", h.Name, b)
		}
	}
	for _, tt := range []struct {
		name string
		run  ExecFunc
	}{
		{"websocket", c.protocolExec(t, "websocket")},
		{"spdy", c.protocolExec(t, "spdy")},
		{"fallback", c.apiExec},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			read(t, tt.run)
			t.Logf("%s: read in %s", tt.name, time.Since(start).Round(time.Millisecond))
		})
	}
	start := time.Now()
	res, err := c.StopMain(ctx, name, "svc", StopOptions{Grace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %s: %+v", time.Since(start).Round(time.Millisecond), res)
	if res != (StopResult{ExitCode: 0}) {
		t.Errorf("StopMain = %+v, want exit 0, not killed", res)
	}
	p, err := c.Pod(ctx, name, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("pod phase %s after the main container's stop, want Running (the holder)", p.Status.Phase)
	}
	t.Run("after the stop", func(t *testing.T) { read(t, c.apiExec) })
}

// protocolExec is an exec over one protocol only, to see which the
// cluster accepts.
func (c *Client) protocolExec(t *testing.T, protocol string) ExecFunc {
	return func(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
		u := c.execURL(ns, pod, container, argv)
		var ex remotecommand.Executor
		var err error
		if protocol == "websocket" {
			ex, err = remotecommand.NewWebSocketExecutor(c.cfg, "GET", u.String())
		} else {
			ex, err = remotecommand.NewSPDYExecutor(c.cfg, "POST", u)
		}
		if err != nil {
			return err
		}
		return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
	}
}
