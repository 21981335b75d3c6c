//go:build kube

package kube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// realImage builds the image the Docker backend runs (orchestrate.NewImage
// over this tree's static binary) with Docker, and imports it into the
// test cluster's containerd.
func realImage(t *testing.T) string {
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
	bin, err := os.ReadFile(filepath.Join(dir, "mcpsidecar"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("reading CA certificates (install ca-certificates): %v", err)
	}
	img, err := orchestrate.NewImage(orchestrate.ImageSource{Binary: bin, CACerts: ca}, map[string]string{orchestrate.LabelApp: "image", "mcpsidecar.test": "1"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := dockerx.New()
	if err != nil {
		t.Fatalf("Docker (to build the image): %v", err)
	}
	method, _, err := orchestrate.EnsureImage(context.Background(), e, img, false)
	if err != nil {
		t.Fatalf("building %s: %v", img.Tag, err)
	}
	t.Cleanup(func() {
		if method != orchestrate.MethodReused {
			_ = exec.Command("docker", "rmi", img.Tag).Run()
		}
		_ = exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "rm", "docker.io/library/"+img.Tag).Run()
	})
	tar := filepath.Join(dir, "image.tar")
	for _, args := range [][]string{{"docker", "save", "-o", tar, img.Tag}, {"ctr", "--address", sock, "-n", "k8s.io", "images", "import", tar}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return img.Tag
}

// TestDoctorRolesOnCluster runs doctor's three roles for real on the test
// cluster: our image (imported), the plan of a doctor run (gateway,
// sidecar without upstream, the agent running `agent --check`), our
// seccomp profile as a Localhost profile, netguard in the agent pod, the
// peers addressed by pod address (no kube-proxy here). The agent's check
// table must pass its rows, as in the Docker doctor.
func TestDoctorRolesOnCluster(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	image := realImage(t)
	p, err := spec.Resolve(loadSpec(t, "default"))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := orchestrate.Credentials(p, "", func(string) string { return "" }, orchestrate.NewPlaceholder())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := orchestrate.NewPlan(orchestrate.Input{
		Profile: p, RunID: testRunID, RunDir: "/runs/" + testRunID, Image: image, Workload: orchestrate.WorkloadCheck,
		Env:   map[string][]dockerx.EnvVar{orchestrate.RoleAgent: creds.Agent, orchestrate.RoleGateway: creds.Gateway},
		Owner: orchestrate.Owner{PID: os.Getpid(), Host: "test"}, Token: "d0c",
		ExtraLabels: map[string]string{"mcpsidecar.test": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Plan: plan, Profile: p, RuntimeImage: image, Token: "d0c"}
	installSeccomp(t, in)
	deleteAtEnd(t, c, in.NamespaceName())

	start := time.Now()
	run, err := c.Create(ctx, in, CreateOptions{ReadyTimeout: 90 * time.Second, PodAddresses: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("gateway and sidecar ready in %s", time.Since(start).Round(time.Millisecond))
	code, err := c.WaitDone(ctx, run.Namespace, PodName(orchestrate.RoleAgent), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent ended %s after the start", time.Since(start).Round(time.Millisecond))
	logs := map[string]string{}
	for _, st := range plan.Containers {
		var b strings.Builder
		if err := c.Logs(ctx, run.Namespace, PodName(st.Role), ContainerName, &b); err != nil {
			t.Error(err)
		}
		logs[st.Role] = b.String()
	}
	t.Logf("agent log:\n%s", logs[orchestrate.RoleAgent])
	if code != 0 {
		t.Errorf("agent --check exited %d, want 0", code)
	}
	for _, row := range []string{"sidecar tools", "answer format", "gateway refuses .invalid", "no route out"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(row) + `\s+ok\s`).MatchString(logs[orchestrate.RoleAgent]) {
			t.Errorf("check %q did not pass", row)
		}
	}
	if t.Failed() {
		t.Logf("gateway log:\n%s\nsidecar log:\n%s", logs[orchestrate.RoleGateway], logs[orchestrate.RoleSidecar])
	}
}
