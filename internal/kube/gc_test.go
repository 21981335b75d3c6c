package kube

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// owner are the labels of run's namespace, owned by pid on host.
func owner(run, host string, pid int, kept bool) map[string]string {
	l := map[string]string{orchestrate.LabelApp: "1", orchestrate.LabelRun: run,
		orchestrate.LabelHost: host, orchestrate.LabelPID: strconv.Itoa(pid), orchestrate.LabelKept: "0"}
	if kept {
		l[orchestrate.LabelKept] = "1"
	}
	return l
}

// gcCluster is a fake cluster holding the namespaces, and the client on it.
func gcCluster(t *testing.T, nss ...*corev1.Namespace) (*Client, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	for _, ns := range nss {
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return &Client{cs: cs, poll: time.Millisecond}, cs
}

func namespace(name string, l map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: l}}
}

func terminating(ns *corev1.Namespace) *corev1.Namespace {
	ns.Status.Phase = corev1.NamespaceTerminating
	return ns
}

// TestLeftovers: every namespace labelled mcpsidecar=1, kept ones
// included, by name, with whether it is already being deleted; nothing
// else.
func TestLeftovers(t *testing.T) {
	c, _ := gcCluster(t,
		namespace("mcpsidecar-b", owner("run-b", "h", 7, true)),
		terminating(namespace("mcpsidecar-a", owner("run-a", "h", 7, false))),
		namespace("team", map[string]string{"team": "x"}),
		namespace("default", nil),
	)
	got, err := c.Leftovers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Leftover{
		{Name: "mcpsidecar-a", UID: "uid-mcpsidecar-a", Labels: owner("run-a", "h", 7, false), Terminating: true},
		{Name: "mcpsidecar-b", UID: "uid-mcpsidecar-b", Labels: owner("run-b", "h", 7, true)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Leftovers mismatch (-want +got):\n%s", d)
	}
}

func TestLeftoversListFails(t *testing.T) {
	c, cs := gcCluster(t)
	cs.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", nil)
	})
	_, err := c.Leftovers(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listing run namespaces (mcpsidecar=1)") || !apierrors.IsForbidden(err) {
		t.Errorf("Leftovers error = %v, want the listing named and the cause kept", err)
	}
}

// TestChoose: the Docker gc's rules, over namespaces.
func TestChoose(t *testing.T) {
	const dead, live = 100, 200
	alive := func(pid int) bool { return pid == live }
	ls := []Leftover{
		{Name: "dead", Labels: owner("run-dead", "here", dead, false)},
		{Name: "dead-terminating", Labels: owner("run-dt", "here", dead, false), Terminating: true},
		{Name: "live", Labels: owner("run-live", "here", live, false)},
		{Name: "other-host", Labels: owner("run-oh", "there", dead, false)},
		{Name: "kept", Labels: owner("run-kept", "here", dead, true)},
		{Name: "kept-live", Labels: owner("run-kl", "here", live, true)},
		{Name: "no-pid", Labels: map[string]string{orchestrate.LabelApp: "1", orchestrate.LabelHost: "here", orchestrate.LabelRun: "run-np"}},
	}
	tests := []struct {
		name     string
		kept     bool
		want     []string
		keptRuns int
	}{
		{"default", false, []string{"dead", "dead-terminating"}, 1},
		{"kept", true, []string{"dead", "dead-terminating", "kept"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chosen, keptRuns := Choose(ls, orchestrate.Selection{Host: "here", Alive: alive, Kept: tt.kept})
			var got []string
			for _, l := range chosen {
				got = append(got, l.Name)
			}
			if !slices.Equal(got, tt.want) || keptRuns != tt.keptRuns {
				t.Errorf("Choose = %v, %d kept; want %v, %d", got, keptRuns, tt.want, tt.keptRuns)
			}
		})
	}
}

// TestRemove: a leftover is deleted and gone; one already Terminating
// is waited for, never deleted again; a refused deletion is reported by
// name and does not stop the others.
func TestRemove(t *testing.T) {
	c, cs := gcCluster(t,
		namespace("plain", owner("r1", "h", 1, false)),
		terminating(namespace("going", owner("r2", "h", 1, false))),
		namespace("refused", owner("r3", "h", 1, false)),
		namespace("bystander", owner("r4", "h", 2, false)),
	)
	gets := 0
	cs.PrependReactor("get", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "going" {
			if gets++; gets > 2 { // the namespace controller finishes
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "going")
			}
		}
		return false, nil, nil
	})
	cs.PrependReactor("delete", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteAction).GetName() == "refused" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "refused", nil)
		}
		return false, nil, nil
	})
	ls := []Leftover{{Name: "plain"}, {Name: "going", Terminating: true}, {Name: "refused"}}
	gone, err := c.Remove(context.Background(), ls)
	var names []string
	for _, l := range gone {
		names = append(names, l.Name)
	}
	if !slices.Equal(names, []string{"plain", "going"}) {
		t.Errorf("gone = %v, want [plain going]", names)
	}
	if err == nil || !strings.Contains(err.Error(), "deleting namespace refused") || strings.Contains(err.Error(), "plain") {
		t.Errorf("error = %v, want only the refused deletion, by name", err)
	}
	var deleted []string
	for _, a := range cs.Actions() {
		if a.GetVerb() == "delete" {
			deleted = append(deleted, a.(k8stesting.DeleteAction).GetName())
		}
	}
	slices.Sort(deleted)
	if !slices.Equal(deleted, []string{"plain", "refused"}) {
		t.Errorf("deletions asked: %v, want plain and refused only (going was already being deleted)", deleted)
	}
	for name, want := range map[string]bool{"plain": false, "refused": true, "bystander": true} {
		_, err := cs.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
		if got := err == nil; got != want {
			t.Errorf("namespace %s there after Remove: %v, want %v", name, got, want)
		}
	}
}

// TestRemoveStuck: a Terminating namespace that does not go fails the
// wait when the context ends, naming it.
func TestRemoveStuck(t *testing.T) {
	c, _ := gcCluster(t, terminating(namespace("stuck", owner("r", "h", 1, false))))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	gone, err := c.Remove(ctx, []Leftover{{Name: "stuck", Terminating: true}})
	if len(gone) != 0 || err == nil || !strings.Contains(err.Error(), "waiting for namespace stuck, already being deleted, to be gone") {
		t.Errorf("Remove = %v, %v; want nothing gone and the wait named", gone, err)
	}
}

// TestStartRemove: deletions are asked for, never waited for; one already
// Terminating is left to finish; a refusal is reported by name and does
// not stop the others.
func TestStartRemove(t *testing.T) {
	c, cs := gcCluster(t,
		namespace("plain", owner("r1", "h", 1, false)),
		terminating(namespace("going", owner("r2", "h", 1, false))),
		namespace("refused", owner("r3", "h", 1, false)),
	)
	cs.PrependReactor("delete", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteAction).GetName() == "refused" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "refused", nil)
		}
		return false, nil, nil
	})
	started, err := c.StartRemove(context.Background(), []Leftover{{Name: "refused"}, {Name: "going", Terminating: true}, {Name: "plain"}})
	if len(started) != 1 || started[0].Name != "plain" {
		t.Errorf("started = %v, want [plain]", started)
	}
	if err == nil || !strings.Contains(err.Error(), "deleting namespace refused") {
		t.Errorf("error = %v, want the refused deletion by name", err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("StartRemove waited: %v", a)
		}
		if a.GetVerb() == "delete" && a.(k8stesting.DeleteAction).GetName() == "going" {
			t.Error("a namespace already being deleted was deleted again")
		}
	}
}
