package kubebackend

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx/dockerxtest"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestKubeBackendInput: the Kubernetes backend holds no role at start
// (an old Docker engine's hold has nothing to release it on a pod).
func TestKubeBackendInput(t *testing.T) {
	in := orchestrate.Input{DropRoutes: true, HoldAll: true}
	if err := New(&Config{}).Input(nil, &in); err != nil {
		t.Fatal(err)
	}
	if in.DropRoutes || in.HoldAll {
		t.Errorf("the Kubernetes backend keeps a hold: DropRoutes %v, HoldAll %v", in.DropRoutes, in.HoldAll)
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
	m := &runs.Metadata{Degradations: []string{"Docker Engine 20.10 is older than 26: ...; accepted by --allow-old-engine: held", "other"}}
	(&kubeBackend{}).engineNote(m)
	if !strings.HasSuffix(m.Degradations[0], "no role ran on it and none was held)") || m.Degradations[1] != "other" {
		t.Errorf("degradations %q", m.Degradations)
	}
}

// TestKubePush: with a registry, our image is tagged REPO:<its content
// hash> and pushed with the config file's credential, and the pods name
// it by the pushed digest; the stderr line names the digest reference and
// never the credential. A refused push fails the phase and leaves the
// image as it was.
func TestKubePush(t *testing.T) {
	const repo = "registry.example.com/team/mcpsidecar"
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(`{"auths":{"registry.example.com":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, refuse := range []bool{false, true} {
		eng := dockerxtest.New()
		eng.Images["mcpsidecar:0123456789abcdef"] = true
		if refuse {
			eng.PushErr = errors.New("denied: requested access to the resource is denied")
		}
		var errb bytes.Buffer
		b := &kubeBackend{k: &Config{Registry: repo, DockerConfig: cfg}}
		say := func(format string, args ...any) { fmt.Fprintf(&errb, format+"\n", args...) }
		in := kube.Input{RuntimeImage: "mcpsidecar:0123456789abcdef"}
		err := b.push(context.Background(), eng, say, &in)
		wantCalls := []string{"tag mcpsidecar:0123456789abcdef " + repo + ":0123456789abcdef", "push " + repo + ":0123456789abcdef"}
		if diff := cmp.Diff(wantCalls, eng.CallList()); diff != "" {
			t.Errorf("refuse %v: engine calls mismatch (-want +got):\n%s", refuse, diff)
		}
		if len(eng.PushAuths) != 1 || eng.PushAuths[0] == "" {
			t.Errorf("refuse %v: push auths %q, want the config's credential", refuse, eng.PushAuths)
		}
		if strings.Contains(errb.String(), "s3cret") || strings.Contains(errb.String(), eng.PushAuths[0]) {
			t.Errorf("refuse %v: the credential is on stderr: %s", refuse, errb.String())
		}
		if refuse {
			if err == nil || !strings.Contains(err.Error(), "denied") || in.RuntimeImage != "mcpsidecar:0123456789abcdef" {
				t.Errorf("refused push: err %v, image %s; want the registry's error and the image unchanged", err, in.RuntimeImage)
			}
			continue
		}
		want := repo + "@" + eng.Pushed[repo+":0123456789abcdef"]
		if err != nil || in.RuntimeImage != want || !strings.HasPrefix(want, repo+"@sha256:") {
			t.Fatalf("push() = %v, image %s; want %s", err, in.RuntimeImage, want)
		}
		if !strings.Contains(errb.String(), "the pods run "+want) {
			t.Errorf("stderr %q does not name %s", errb.String(), want)
		}
	}
}

// TestPodOutputDir: the files are read at the output mount's path in the
// container, the mount whose source is the step's output directory.
func TestPodOutputDir(t *testing.T) {
	st := orchestrate.Step{OutputDir: "/runs/r1/gateway", Spec: dockerx.ContainerSpec{Mounts: []dockerx.Mount{
		{Source: "/runs/r1/other", Target: "/x", ReadOnly: false},
		{Source: "/runs/r1/gateway", Target: "/sandbox-output"},
	}}}
	if got, ok := podOutputDir(st); !ok || got != "/sandbox-output" {
		t.Errorf("podOutputDir = %q, %v", got, ok)
	}
	if _, ok := podOutputDir(orchestrate.Step{OutputDir: "/runs/r1/agent"}); ok {
		t.Error("an output directory found without a mount")
	}
}
