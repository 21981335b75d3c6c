package kube

import (
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// TestJudgeLayers: the bare pod connecting means the policies are not
// enforced (a degradation, the layer does not hold); the guarded pod
// connecting means the pod's own rules failed.
func TestJudgeLayers(t *testing.T) {
	refused := DialResult{Address: "10.0.0.9:18080", Error: "i/o timeout"}
	connected := DialResult{Address: "10.0.0.9:18080", Connected: true}
	for _, tt := range []struct {
		name             string
		bare, guarded    DialResult
		policy, podRules string
	}{
		{"plugin enforces, rules hold", refused, refused, "enforced", "held"},
		{"no enforcer, rules hold", connected, refused, "not enforced", "held"},
		{"no enforcer, rules fail", connected, connected, "not enforced", "failed"},
		{"plugin enforces, rules fail", refused, connected, "enforced", "failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := judgeLayers("10.0.0.9:18080", tt.bare, tt.guarded)
			if len(l.Layers) != 2 || l.Layers[0].Name != LayerNetworkPolicy || l.Layers[1].Name != LayerPodRules {
				t.Fatalf("layers %+v", l.Layers)
			}
			np, pr := l.Layers[0], l.Layers[1]
			if np.State != tt.policy || np.Holds != (tt.policy == "enforced") {
				t.Errorf("networkpolicy %+v, want %s", np, tt.policy)
			}
			if pr.State != tt.podRules || pr.Holds != (tt.podRules == "held") {
				t.Errorf("pod-rules %+v, want %s", pr, tt.podRules)
			}
			if !strings.Contains(np.Evidence, "10.0.0.9:18080") || !strings.Contains(pr.Evidence, "10.0.0.9:18080") {
				t.Errorf("evidence does not name the target: %q / %q", np.Evidence, pr.Evidence)
			}
		})
	}
}

func TestParseDial(t *testing.T) {
	r, err := parseDial([]byte("warning: x\n{\"address\":\"10.0.0.9:18080\",\"connected\":true}\n"))
	if err != nil || !r.Connected || r.Address != "10.0.0.9:18080" {
		t.Errorf("parseDial = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "connected\n", "{}\n", `{"connected":true}`} {
		if _, err := parseDial([]byte(bad)); err == nil {
			t.Errorf("parseDial(%q) accepted", bad)
		}
	}
}

// TestLayerPod: both dialling pods carry the agent's labels and security
// contexts (so the policies and the cluster's admission treat them as the
// agent); only the guarded one keeps netguard; neither holds the agent's
// env (its secrets), volumes or other containers.
func TestLayerPod(t *testing.T) {
	in := input(t, "default", orchestrate.WorkloadProbe)
	set, err := Objects(in)
	if err != nil {
		t.Fatal(err)
	}
	agent := set.pod(PodName(orchestrate.RoleAgent))
	if agent == nil || len(agent.Spec.InitContainers) != 1 {
		t.Fatalf("agent pod %v has no netguard init container", agent)
	}
	for _, guarded := range []bool{false, true} {
		p := layerPod(agent, "layer-x", ourImage, []string{LayerCommand, "dial", "10.0.0.9:18080"}, guarded)
		if p.Labels[orchestrate.LabelRole] != orchestrate.RoleAgent || p.Labels[orchestrate.LabelRun] != agent.Labels[orchestrate.LabelRun] {
			t.Errorf("guarded=%v labels %v, want the agent's", guarded, p.Labels)
		}
		if got := len(p.Spec.InitContainers); got != map[bool]int{false: 0, true: 1}[guarded] {
			t.Errorf("guarded=%v: %d init containers", guarded, got)
		}
		if len(p.Spec.Containers) != 1 || len(p.Spec.Volumes) != 0 || len(p.Spec.Containers[0].Env) != 0 || len(p.Spec.Containers[0].EnvFrom) != 0 {
			t.Errorf("guarded=%v: containers %d volumes %d env %v", guarded, len(p.Spec.Containers), len(p.Spec.Volumes), p.Spec.Containers[0].Env)
		}
		c := p.Spec.Containers[0]
		if c.Image != ourImage || c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("guarded=%v: container %+v, want our image with the agent's security context", guarded, c)
		}
		if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
			t.Errorf("guarded=%v: service account token mounted", guarded)
		}
	}
	if len(agent.Spec.InitContainers) != 1 || agent.Name != PodName(orchestrate.RoleAgent) {
		t.Error("layerPod changed the agent pod")
	}
}
