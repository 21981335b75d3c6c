package timeline

import (
	"sort"
	"time"
)

// anchorRank says which kinds of event a correlation group hangs from: the
// sidecar's record of a call is the most specific cause of the egress that
// carries its id, then the agent's model request, then the agent's own
// record of issuing a tool call.
func anchorRank(kind string) int {
	switch kind {
	case KindToolCall, KindResourceRead:
		return 3
	case KindModelRequest:
		return 2
	case KindAgentToolCall:
		return 1
	}
	return 0
}

// timeWindowSlack widens a model request's span when linking egress that
// carries no correlation id, to absorb clock skew between containers.
const timeWindowSlack = 250 * time.Millisecond

// link sets Parent and LinkedBy on events sorted by time: within each group
// of events sharing a correlation id, every non-anchor event hangs from the
// anchor nearest in time. Egress without an id hangs from the one model
// request whose span contains it, if exactly one does and the agent does
// not stamp its model requests with ids.
func link(ev []Event) {
	groups := map[string][]int{}
	for i := range ev {
		if id := ev[i].CorrelationID; id != "" {
			groups[id] = append(groups[id], i)
		}
	}
	for _, idx := range groups {
		linkGroup(ev, idx)
	}
	linkByTime(ev)
}

func linkGroup(ev []Event, idx []int) {
	best := 0
	for _, i := range idx {
		best = max(best, anchorRank(ev[i].Kind))
	}
	if best == 0 {
		return
	}
	var anchors []int
	for _, i := range idx {
		if anchorRank(ev[i].Kind) == best {
			anchors = append(anchors, i)
		}
	}
	for _, i := range idx {
		if anchorRank(ev[i].Kind) == best {
			continue
		}
		a := nearest(ev, anchors, ev[i].Time)
		ev[i].Parent, ev[i].LinkedBy = ev[a].Seq, LinkCorrelation
	}
}

// nearest returns the anchor (indices in time order) closest in time to t.
func nearest(ev []Event, anchors []int, t time.Time) int {
	k := sort.Search(len(anchors), func(j int) bool { return !ev[anchors[j]].Time.Before(t) })
	switch {
	case k == 0:
		return anchors[0]
	case k == len(anchors):
		return anchors[k-1]
	}
	before, after := ev[anchors[k-1]].Time, ev[anchors[k]].Time
	if t.Sub(before) <= after.Sub(t) {
		return anchors[k-1]
	}
	return anchors[k]
}

func linkByTime(ev []Event) {
	if modelsStamped(ev) {
		return
	}
	var models []int
	for i := range ev {
		if ev[i].Kind == KindModelRequest && !ev[i].Time.IsZero() {
			models = append(models, i)
		}
	}
	for i := range ev {
		e := &ev[i]
		if e.Kind != KindEgress || e.CorrelationID != "" || e.Time.IsZero() {
			continue
		}
		if m, ok := onlyContaining(ev, models, e.Time); ok {
			e.Parent, e.LinkedBy = ev[m].Seq, LinkTimeWindow
		}
	}
}

// modelsStamped reports whether the agent sends correlation ids on its
// model requests (some decision already hangs from a model request by id).
// Then a decision without an id did not come from a model request, and
// hanging it under one by time would hide a stray connection (perhaps an
// exfiltration attempt) inside ordinary model traffic.
func modelsStamped(ev []Event) bool {
	for i := range ev {
		if ev[i].Kind == KindEgress && ev[i].LinkedBy == LinkCorrelation && ev[ev[i].Parent-1].Kind == KindModelRequest {
			return true
		}
	}
	return false
}

// onlyContaining returns the one model request whose span (its time plus
// or minus its duration, since producers differ on whether they stamp the
// start or the end) contains t; ok is false when none or several do, so an
// ambiguous connection is left unattributed rather than guessed.
func onlyContaining(ev []Event, models []int, t time.Time) (int, bool) {
	found, n := 0, 0
	for _, m := range models {
		d := time.Duration(ev[m].DurationMS*float64(time.Millisecond)) + timeWindowSlack
		if !t.Before(ev[m].Time.Add(-d)) && !t.After(ev[m].Time.Add(d)) {
			found, n = m, n+1
		}
	}
	return found, n == 1
}
