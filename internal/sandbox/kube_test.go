package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestCopyRegular: a role's output volume was writable by the sandboxed
// role, so only regular files within the cap are copied; a link, a FIFO
// or an oversized file is refused with its name, and a missing file is
// not an error.
func TestCopyRegular(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srcDir, "ok.jsonl"), []byte("line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srcDir, "big.jsonl"), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(srcDir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(srcDir, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := os.OpenRoot(srcDir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenRoot(dstDir)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	for _, tt := range []struct{ name, wantErr string }{
		{"ok.jsonl", ""}, {"missing.jsonl", ""},
		{"link.jsonl", "not a regular file"}, {"fifo.jsonl", "not a regular file"}, {"big.jsonl", "over the 50-byte cap"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := copyRegular(src, dst, tt.name, 50)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("copyRegular = %v, want %q", err, tt.wantErr)
			}
			_, statErr := os.Lstat(filepath.Join(dstDir, tt.name))
			if copied := statErr == nil; copied != (tt.name == "ok.jsonl") {
				t.Errorf("copied = %v", copied)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(dstDir, "ok.jsonl")); string(b) != "line\n" {
		t.Errorf("copied %q", b)
	}
}

// TestKubePlanInput: the Kubernetes backend holds no role at start (an
// old Docker engine's hold has nothing to release it on a pod), and the
// caller's hook still runs.
func TestKubePlanInput(t *testing.T) {
	called := false
	f := kubePlanInput(func(in *orchestrate.Input) error { called = true; return nil })
	in := orchestrate.Input{HoldInternal: true}
	if err := f(&in); err != nil {
		t.Fatal(err)
	}
	if in.HoldInternal || !called {
		t.Errorf("HoldInternal %v, next called %v; want false, true", in.HoldInternal, called)
	}
	if err := kubePlanInput(nil)(&in); err != nil {
		t.Fatal(err)
	}
}

// TestAddHolder: with a node root, the agent's pod (only) gets the holder
// container with the agent's security context and the output volume
// read-only.
func TestAddHolder(t *testing.T) {
	sc := &corev1.SecurityContext{RunAsNonRoot: ptr(true), ReadOnlyRootFilesystem: ptr(true)}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: kube.ContainerName, SecurityContext: sc,
			VolumeMounts: []corev1.VolumeMount{{Name: kube.OutputVolume, MountPath: "/sandbox-output"}, {Name: "tmpfs-tmp", MountPath: "/tmp"}}}}}}
	}
	k := &Kube{NodeRoot: "/var/lib/kubelet", HolderImage: "pause:1"}
	agent, gateway := pod(kube.PodName(orchestrate.RoleAgent)), pod(kube.PodName(orchestrate.RoleGateway))
	agent.Name, gateway.Name = kube.PodName(orchestrate.RoleAgent), kube.PodName(orchestrate.RoleGateway)
	k.addHolder(agent)
	k.addHolder(gateway)
	if len(gateway.Spec.Containers) != 1 {
		t.Errorf("gateway pod has %d containers, want 1", len(gateway.Spec.Containers))
	}
	if len(agent.Spec.Containers) != 2 {
		t.Fatalf("agent pod has %d containers, want 2", len(agent.Spec.Containers))
	}
	h := agent.Spec.Containers[1]
	if h.Name != holderName || h.Image != "pause:1" || !*h.SecurityContext.RunAsNonRoot || !*h.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("holder %+v", h)
	}
	if len(h.VolumeMounts) != 1 || h.VolumeMounts[0].Name != kube.OutputVolume || !h.VolumeMounts[0].ReadOnly {
		t.Errorf("holder mounts %+v, want the output volume read-only", h.VolumeMounts)
	}
	if agent.Spec.Containers[0].VolumeMounts[0].ReadOnly {
		t.Error("the agent's own output mount became read-only")
	}
	none := pod("agent")
	none.Name = "agent"
	(&Kube{}).addHolder(none)
	if len(none.Spec.Containers) != 1 {
		t.Error("a holder was added without a node root")
	}
}

func ptr[T any](v T) *T { return &v }

func TestKubeEngineNote(t *testing.T) {
	j := &job{meta: runs.Metadata{Degradations: []string{"Docker Engine 20.10 is older than 26: ...; accepted by --allow-old-engine: held", "other"}}}
	j.kubeEngineNote()
	if !strings.HasSuffix(j.meta.Degradations[0], "no role ran on it and none was held)") || j.meta.Degradations[1] != "other" {
		t.Errorf("degradations %q", j.meta.Degradations)
	}
}
