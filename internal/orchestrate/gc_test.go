package orchestrate

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// TestPlanKeepLabels: --keep marks every network and container as kept;
// without it nothing carries the mark.
func TestPlanKeepLabels(t *testing.T) {
	for _, keep := range []bool{false, true} {
		in := input(t, defaultSpec(t), WorkloadAgent)
		in.Keep = keep
		p, err := NewPlan(in)
		if err != nil {
			t.Fatal(err)
		}
		var labels []map[string]string
		for _, n := range p.Networks {
			labels = append(labels, n.Labels)
		}
		for _, c := range p.Containers {
			labels = append(labels, c.Spec.Labels)
		}
		for _, l := range labels {
			if got := l[LabelKept] == "1"; got != keep {
				t.Errorf("keep %v: labels %v", keep, l)
			}
			if _, set := l[LabelKept]; !set {
				t.Errorf("keep %v: %s not set (an image's own label would stand): %v", keep, LabelKept, l)
			}
		}
	}
}

func TestSelection(t *testing.T) {
	res := func(name, run, pid, kept string) dockerx.Resource {
		l := map[string]string{LabelApp: "1", LabelHost: "here", LabelRun: run, LabelPID: pid}
		if kept != "" {
			l[LabelKept] = kept
		}
		return dockerx.Resource{ID: name, Name: name, Labels: l}
	}
	all := []dockerx.Resource{
		res("dead", "r1", "100", ""),
		res("dead-kept", "r2", "100", "1"),
		res("alive", "r3", "200", ""),
		res("alive-kept", "r3", "200", "1"),
		{ID: "other-host", Name: "other-host", Labels: map[string]string{LabelApp: "1", LabelHost: "there", LabelPID: "100"}},
	}
	alive := func(pid int) bool { return pid == 200 }
	tests := []struct {
		name string
		sel  Selection
		want []string
	}{
		{"gc leaves kept", Selection{Host: "here", Alive: alive}, []string{"dead"}},
		{"gc --kept", Selection{Host: "here", Alive: alive, Kept: true}, []string{"dead", "dead-kept"}},
		{"runs rm kept run", Selection{Host: "here", Alive: alive, Run: "r2"}, []string{"dead-kept"}},
		{"runs rm live run", Selection{Host: "here", Alive: alive, Run: "r3"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range tt.sel.filter(all) {
				got = append(got, r.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if pid := LiveOwner(all, "here", "r3", alive); pid != 200 {
		t.Errorf("LiveOwner(r3) = %d, want 200", pid)
	}
	if pid := LiveOwner(all, "here", "r2", alive); pid != 0 {
		t.Errorf("LiveOwner(r2) = %d, want 0", pid)
	}
}

// TestGCLeavesKept: the automatic gc removes a dead run's resources but
// not a kept run's; Sweep with Kept removes those too.
func TestGCLeavesKept(t *testing.T) {
	f := newFake()
	dead := map[string]string{LabelApp: "1", LabelHost: "h", LabelPID: "7"}
	kept := map[string]string{LabelApp: "1", LabelHost: "h", LabelPID: "7", LabelKept: "1"}
	f.Containers = []dockerx.Resource{{ID: "c1", Labels: dead}, {ID: "k1", Labels: kept}}
	f.Networks = []dockerx.Resource{{ID: "n1", Labels: dead}, {ID: "kn1", Labels: kept}}
	dead7 := func(int) bool { return false }
	if _, err := GC(context.Background(), f, "h", dead7); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"remove c1", "remove-network n1"}, f.Calls); diff != "" {
		t.Errorf("gc (-want +got):\n%s", diff)
	}
	f.Calls = nil
	f.Containers, f.Networks = f.Containers[1:], f.Networks[1:] // what gc removed is gone
	got, err := Sweep(context.Background(), f, Selection{Host: "h", Alive: dead7, Kept: true})
	if err != nil || len(got.Containers) == 0 {
		t.Fatalf("Sweep = %+v, %v", got, err)
	}
	if diff := cmp.Diff([]string{"remove k1", "remove-network kn1"}, f.Calls); diff != "" {
		t.Errorf("gc --kept (-want +got):\n%s", diff)
	}
}
