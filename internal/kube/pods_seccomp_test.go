package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/plan"
)

// TestSeccompProfile: a plan's profile is a Localhost profile named by
// its hash; none in the plan, or pods told to use the runtime's default,
// is RuntimeDefault (never Unconfined).
func TestSeccompProfile(t *testing.T) {
	ours := plan.Container{Seccomp: `{"defaultAction":"SCMP_ACT_ERRNO"}`}
	got := Input{}.seccompProfile(ours)
	if got.Type != corev1.SeccompProfileTypeLocalhost || got.LocalhostProfile == nil || *got.LocalhostProfile != SeccompDir+"/"+SeccompFile(ours.Seccomp) {
		t.Errorf("our profile: %+v", got)
	}
	for name, sp := range map[string]*corev1.SeccompProfile{
		"none in the plan": Input{}.seccompProfile(plan.Container{}),
		"runtime default":  Input{RuntimeDefaultSeccomp: true}.seccompProfile(ours),
	} {
		if sp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: %+v, want RuntimeDefault", name, sp)
		}
	}
}
