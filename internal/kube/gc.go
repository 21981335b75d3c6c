package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/plan"
)

// Leftover is a run namespace as gc sees it: the namespace, its owner
// labels, and whether the cluster is already deleting it.
type Leftover struct {
	Name   string
	UID    string
	Labels map[string]string
	// Terminating: a deletion was asked before (a teardown interrupted
	// while it waited, an earlier gc) and the namespace controller is
	// still emptying it.
	Terminating bool
}

// RunID is the run id of the leftover's labels.
func (l Leftover) RunID() string { return l.Labels[orchestrate.LabelRun] }

// Leftovers lists every run namespace (label mcpsidecar=1), kept ones
// included, by name: which of them gc may delete is [Choose]'s decision.
// [Client.RunNamespaces] leaves kept ones out, which gc --kept removes,
// and does not say which are already being deleted.
func (c *Client) Leftovers(ctx context.Context) ([]Leftover, error) {
	sel := orchestrate.LabelApp + "=1"
	list, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing run namespaces (%s): %w", sel, err)
	}
	out := []Leftover{}
	for _, ns := range list.Items {
		out = append(out, Leftover{
			Name: ns.Name, UID: string(ns.UID), Labels: ns.Labels,
			Terminating: ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil,
		})
	}
	slices.SortFunc(out, func(a, b Leftover) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Choose picks the leftovers sel selects, by the rules gc applies to
// Docker resources (orchestrate.Selection: this host, a dead owner, kept
// runs only when asked). keptRuns counts the runs kept with --keep that
// sel leaves only because they are kept, so gc can say how to remove
// them.
func Choose(ls []Leftover, sel orchestrate.Selection) (chosen []Leftover, keptRuns int) {
	withKept := sel
	withKept.Kept = true
	kept := map[string]bool{}
	for _, l := range ls {
		r := plan.Resource{ID: l.UID, Name: l.Name, Labels: l.Labels}
		switch {
		case sel.Picks(r):
			chosen = append(chosen, l)
		case l.Labels[orchestrate.LabelKept] == "1" && withKept.Picks(r):
			kept[l.RunID()] = true
		}
	}
	return chosen, len(kept)
}

// removeParallel is how many namespaces [Client.Remove] deletes at once:
// each deletion is mostly the namespace controller's wait (five seconds
// for an empty one on the test cluster), so waiting for several together
// bounds gc's time by the slowest, not the sum.
const removeParallel = 4

// Remove deletes the leftovers and waits until each is gone, up to
// [DeleteTimeout] each, several at a time. A leftover already
// Terminating is not deleted again, only waited for. It goes on past
// failures and returns the leftovers that are gone, in ls's order, and
// the failures joined.
func (c *Client) Remove(ctx context.Context, ls []Leftover) ([]Leftover, error) {
	errs := make([]error, len(ls))
	sem := make(chan struct{}, removeParallel)
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if l.Terminating {
				errs[i] = c.waitGone(ctx, l.Name)
			} else {
				errs[i] = c.Delete(ctx, l.Name)
			}
		}()
	}
	wg.Wait()
	gone := []Leftover{}
	for i, l := range ls {
		if errs[i] == nil {
			gone = append(gone, l)
		}
	}
	return gone, errors.Join(errs...)
}

// waitGone waits until a namespace being deleted is gone.
func (c *Client) waitGone(ctx context.Context, ns string) error {
	if err := c.untilGone(ctx, ns); err != nil {
		return fmt.Errorf("waiting for namespace %s, already being deleted, to be gone: %w", ns, err)
	}
	return nil
}

// untilGone polls until the namespace no longer exists, up to
// DeleteTimeout.
func (c *Client) untilGone(ctx context.Context, ns string) error {
	return wait.PollUntilContextTimeout(ctx, c.poll, DeleteTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// StartRemove asks the cluster to delete the leftovers not already being
// deleted and does not wait: a run removes what dead runs left before it
// starts (as it does for Docker), and the namespace controller finishes
// the deletion while the run goes on. It returns the leftovers whose
// deletion it started.
func (c *Client) StartRemove(ctx context.Context, ls []Leftover) ([]Leftover, error) {
	fg := metav1.DeletePropagationForeground
	var started []Leftover
	var errs []error
	for _, l := range ls {
		if l.Terminating {
			continue
		}
		err := c.cs.CoreV1().Namespaces().Delete(ctx, l.Name, metav1.DeleteOptions{PropagationPolicy: &fg})
		switch {
		case err == nil:
			started = append(started, l)
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("deleting namespace %s: %w", l.Name, err))
		}
	}
	return started, errors.Join(errs...)
}
