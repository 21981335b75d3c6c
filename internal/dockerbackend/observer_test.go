package dockerbackend

import (
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// TestObserverKeepsTheFirst: a role recorded as released unread keeps
// that observation; a reading made after its release does not replace it
// (red team, session 37).
func TestObserverKeepsTheFirst(t *testing.T) {
	o := newObserver()
	o.record("agent", runs.Observation{Detail: "not observed: released unread", Unproven: "released unread"})
	o.record("agent", runs.Observation{Seen: true, Seccomp: 2, SeccompFilters: 2, NoNewPrivs: true, UID: 65532})
	if got := o.close()["agent"]; got.Seen || got.Unproven == "" {
		t.Errorf("got %+v, want the first, unread, observation", got)
	}
}
