package kubebackend

import (
	"context"

	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// measureLayers measures, for test-sandbox on a cluster, which of the
// agent's two network layers hold there (kube.CheckLayers; issue 20 item
// 3), before the probe suite's result is known: the NetworkPolicies
// (enforced only by some network plugins) and the agent pod's own rules.
// The result is kube-layers.json; a policy layer that is not enforced is a
// recorded degradation (the pod's rules stand in for it), pod rules that
// do not hold are an isolation violation (isolation).
func (b *kubeBackend) measureLayers(ctx context.Context, r *sandbox.Job, run *kube.Run) error {
	if r.Options().Workload != orchestrate.WorkloadProbe {
		return nil
	}
	return r.Phase("layers", func() error {
		l, err := b.k.Client.CheckLayers(ctx, run, b.image, r.Options().ReadyTimeout)
		if err != nil {
			return err
		}
		b.layers = &l
		for _, layer := range l.Layers {
			r.Say("kubernetes layer %-13s %s: %s", layer.Name, layer.State, layer.Evidence)
			if layer.Name == kube.LayerNetworkPolicy && !layer.Holds {
				m := r.Metadata()
				m.Degradations = append(m.Degradations, "kubernetes: NetworkPolicies are not enforced on this cluster ("+layer.Evidence+"); the agent pod's own rules are its network isolation")
			}
		}
		return r.WriteJSON(runs.FileKubeLayers, l)
	})
}

// isolation is the verdict's checks of the measured layers: the
// agent pod's own rules must hold.
func (b *kubeBackend) Isolation(*sandbox.Job) []runs.Check {
	if b.layers == nil {
		return nil
	}
	var out []runs.Check
	for _, l := range b.layers.Layers {
		if l.Name == kube.LayerPodRules {
			out = append(out, runs.Check{Name: "agent pod's own network rules hold (Kubernetes)", OK: l.Holds, Detail: l.Evidence})
		}
	}
	return out
}
