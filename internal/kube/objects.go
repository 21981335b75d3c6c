package kube

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/plan"
)

// Set is every object of one run, in creation order.
type Set struct {
	Namespace      *corev1.Namespace
	ServiceAccount *corev1.ServiceAccount
	Secrets        []*corev1.Secret
	Services       []*corev1.Service
	Policies       []*networkingv1.NetworkPolicy
	Pods           []*corev1.Pod
}

// Objects maps the whole run (in.ServiceIPs included).
func Objects(in Input) (Set, error) {
	var s Set
	var err error
	if s.Namespace, err = Namespace(in); err != nil {
		return Set{}, err
	}
	if s.ServiceAccount, err = ServiceAccount(in); err != nil {
		return Set{}, err
	}
	if s.Services, err = Services(in); err != nil {
		return Set{}, err
	}
	if s.Policies, err = Policies(in); err != nil {
		return Set{}, err
	}
	if s.Pods, s.Secrets, err = Pods(in); err != nil {
		return Set{}, err
	}
	return s, nil
}

// YAML writes the set as one YAML stream, each Secret's values replaced by
// plan.Redacted, so it can be written to the run directory.
func (s Set) YAML() ([]byte, error) {
	objs := []any{s.Namespace, s.ServiceAccount}
	for _, sec := range s.Secrets {
		r := sec.DeepCopy()
		for k := range r.StringData {
			r.StringData[k] = plan.Redacted
		}
		for k := range r.Data {
			r.Data[k] = []byte(plan.Redacted)
		}
		objs = append(objs, r)
	}
	for _, o := range s.Services {
		objs = append(objs, o)
	}
	for _, o := range s.Policies {
		objs = append(objs, o)
	}
	for _, o := range s.Pods {
		objs = append(objs, o)
	}
	var b bytes.Buffer
	for i, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("writing object %d as YAML: %w", i, err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// PodSecurityLevel is the namespace's Pod Security Admission level. Every
// container of the run meets "restricted" except the agent pod's netguard
// init container, which needs NET_ADMIN (and root to hold it) for the
// few milliseconds it programs the pod's own rules; no lower level admits
// that, so the namespace is labelled privileged and the tests check the
// restricted fields container by container instead.
const PodSecurityLevel = "privileged"

// Namespace is the run's namespace, labelled like every Docker resource
// of a run (the run id, the owner, mcpsidecar.kept) so gc finds it.
func Namespace(in Input) (*corev1.Namespace, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	l := in.runLabels()
	l["pod-security.kubernetes.io/enforce"] = PodSecurityLevel
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: in.NamespaceName(), Labels: l},
	}, nil
}

// ServiceAccountName is the account every pod of a run runs under.
const ServiceAccountName = "sandbox"

// ServiceAccount is the run's own account, with no token mounted and no
// role bound: the pods never talk to the API server. It is created with
// the namespace so that the pods do not race the controller that makes
// the namespace's "default" account.
func ServiceAccount(in Input) (*corev1.ServiceAccount, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	return &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   in.meta(ServiceAccountName, ""),
		AutomountServiceAccountToken: ptr(false),
	}, nil
}

// runLabels are the plan's ownership labels without the role.
func (in Input) runLabels() map[string]string {
	l := maps.Clone(in.Plan.Containers[0].Spec.Labels)
	if l == nil {
		l = map[string]string{}
	}
	delete(l, orchestrate.LabelRole)
	l[orchestrate.LabelRun] = in.Plan.RunID
	return l
}

func (in Input) meta(name, role string) metav1.ObjectMeta {
	l := in.runLabels()
	if role != "" {
		l[orchestrate.LabelRole] = role
	}
	return metav1.ObjectMeta{Name: name, Namespace: in.NamespaceName(), Labels: l}
}

func (in Input) selector(role string) map[string]string {
	return map[string]string{orchestrate.LabelRun: in.Plan.RunID, orchestrate.LabelRole: role}
}

// SecretName is the Secret holding role's secret environment values.
func SecretName(role string) string { return role + "-env" }

// env is the plan's environment in its order; a secret value (a
// forwarded key) goes to the role's Secret and is referenced, so it is
// never in the pod's spec.
func (in Input) env(st orchestrate.Step) ([]corev1.EnvVar, *corev1.Secret) {
	var out []corev1.EnvVar
	var sec *corev1.Secret
	for _, e := range st.Spec.Env {
		if !e.Secret {
			out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
			continue
		}
		if sec == nil {
			sec = &corev1.Secret{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: in.meta(SecretName(st.Role), st.Role),
				Type:       corev1.SecretTypeOpaque, StringData: map[string]string{},
			}
		}
		sec.StringData[e.Name] = e.Value
		out = append(out, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(st.Role)}, Key: e.Name}}})
	}
	return out, sec
}

// volumes maps the plan's writable paths: each tmpfs to a memory-backed
// emptyDir of the same size, the output directory to a disk emptyDir (the
// client copies its files out), and the launcher's read-only mount to an
// image volume of our image. Any other host path has no Kubernetes form
// here, and is an error rather than a silently missing file.
func (in Input) volumes(st orchestrate.Step) ([]corev1.Volume, []corev1.VolumeMount, error) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, path := range slices.Sorted(maps.Keys(st.Spec.Tmpfs)) {
		size, err := tmpfsSize(st.Spec.Tmpfs[path])
		if err != nil {
			return nil, nil, fmt.Errorf("tmpfs %s: %w", path, err)
		}
		name := "tmpfs" + strings.ReplaceAll(strings.ToLower(path), "/", "-")
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: size}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: path})
	}
	for _, m := range st.Spec.Mounts {
		switch {
		case m.Source == st.OutputDir && !m.ReadOnly:
			vols = append(vols, corev1.Volume{Name: outputVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			mounts = append(mounts, corev1.VolumeMount{Name: outputVolume, MountPath: m.Target})
		case in.LauncherPath != "" && m.Target == in.LauncherPath && m.ReadOnly:
			vols = append(vols, corev1.Volume{Name: launcherVolume, VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{Reference: in.RuntimeImage, PullPolicy: corev1.PullIfNotPresent}}})
			mounts = append(mounts, corev1.VolumeMount{Name: launcherVolume, MountPath: m.Target, SubPath: launcherInImage, ReadOnly: true})
		default:
			return nil, nil, fmt.Errorf("mount of host path %s at %s has no Kubernetes mapping (only the output directory and the launcher are mapped)", m.Source, m.Target)
		}
	}
	return vols, mounts, nil
}

// tmpfsSize reads size= (bytes) from Docker tmpfs options.
func tmpfsSize(opts string) (*resource.Quantity, error) {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("size %q: %w", v, err)
			}
			return &q, nil
		}
	}
	return nil, fmt.Errorf("options %q have no size: an unbounded memory volume is refused", opts)
}
