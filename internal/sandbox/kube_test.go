package sandbox

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

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

// TestAddHolder: every pod with an output volume gets the holder
// container: our image and hold command, the main container's security
// context, the output volume read-only at the same path, and no other
// mount; a pod without an output volume gets none.
func TestAddHolder(t *testing.T) {
	sc := &corev1.SecurityContext{RunAsNonRoot: ptr(true), ReadOnlyRootFilesystem: ptr(true)}
	pod := func(mounts ...corev1.VolumeMount) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: kube.ContainerName, SecurityContext: sc, VolumeMounts: mounts}}}}
	}
	out := corev1.VolumeMount{Name: kube.OutputVolume, MountPath: "/sandbox-output"}
	with, without := pod(out, corev1.VolumeMount{Name: "tmpfs-tmp", MountPath: "/tmp"}), pod(corev1.VolumeMount{Name: "tmpfs-tmp", MountPath: "/tmp"})
	addHolder("mcpsidecar:0123")(with)
	addHolder("mcpsidecar:0123")(without)
	if len(without.Spec.Containers) != 1 {
		t.Errorf("a pod without an output volume has %d containers, want 1", len(without.Spec.Containers))
	}
	if len(with.Spec.Containers) != 2 {
		t.Fatalf("the pod has %d containers, want 2", len(with.Spec.Containers))
	}
	h := with.Spec.Containers[1]
	if h.Name != kube.HolderContainer || h.Image != "mcpsidecar:0123" || !slices.Equal(h.Command, []string{"/mcpsidecar", "kube-hold"}) ||
		!*h.SecurityContext.RunAsNonRoot || !*h.SecurityContext.ReadOnlyRootFilesystem || h.SecurityContext == sc {
		t.Errorf("holder %+v", h)
	}
	if len(h.VolumeMounts) != 1 || h.VolumeMounts[0].Name != kube.OutputVolume || h.VolumeMounts[0].MountPath != "/sandbox-output" || !h.VolumeMounts[0].ReadOnly {
		t.Errorf("holder mounts %+v, want the output volume read-only", h.VolumeMounts)
	}
	if with.Spec.Containers[0].VolumeMounts[0].ReadOnly {
		t.Error("the role's own output mount became read-only")
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
