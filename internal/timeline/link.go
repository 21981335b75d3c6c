package timeline

import (
	"fmt"
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
//
// A gateway decision hangs from a tool call only when o proves the sidecar
// sent it: the id is the traceparent the client sent, which the workload
// chooses for the sidecar's call too, so a request of the workload's own
// can carry a call's id. Such a decision (o says the agent) is not linked
// to the call but kept as the agent's own, with a warning and a problem
// naming the call (the attempt is worth recording); one whose origin
// cannot be proved is not linked to a call either. It returns the
// problems.
func link(ev []Event, o Origins) []Problem {
	groups := map[string][]int{}
	for i := range ev {
		if id := ev[i].CorrelationID; id != "" {
			groups[id] = append(groups[id], i)
		}
	}
	var problems []Problem
	for _, idx := range groups {
		problems = append(problems, linkGroup(ev, idx, o)...)
	}
	linkByTime(ev)
	sort.Slice(problems, func(i, j int) bool { return problems[i].Line < problems[j].Line })
	return problems
}

// isCall reports whether kind is a record of a tool call or resource read:
// the sidecar's, or the agent's record of issuing one.
func isCall(kind string) bool {
	return kind == KindToolCall || kind == KindResourceRead || kind == KindAgentToolCall
}

func linkGroup(ev []Event, idx []int, o Origins) []Problem {
	best := 0
	for _, i := range idx {
		best = max(best, anchorRank(ev[i].Kind))
	}
	if best == 0 {
		return nil
	}
	var anchors, models, calls []int
	for _, i := range idx {
		if anchorRank(ev[i].Kind) == best {
			anchors = append(anchors, i)
		}
		if ev[i].Kind == KindModelRequest {
			models = append(models, i)
		}
		if isCall(ev[i].Kind) {
			calls = append(calls, i)
		}
	}
	var problems []Problem
	for _, i := range idx {
		if anchorRank(ev[i].Kind) == best {
			continue
		}
		e := &ev[i]
		if e.Kind == KindEgress {
			if origin := o.Of(e); origin != OriginSidecar {
				// Not the sidecar's: only the agent's own model request
				// may own it.
				if len(models) > 0 {
					a := nearest(ev, models, e.Time)
					e.Parent, e.LinkedBy = ev[a].Seq, LinkCorrelation
				}
				if origin == OriginAgent && len(calls) > 0 {
					problems = append(problems, flagReusedID(e, &ev[nearest(ev, calls, e.Time)]))
				}
				continue
			}
		}
		a := nearest(ev, anchors, e.Time)
		e.Parent, e.LinkedBy = ev[a].Seq, LinkCorrelation
	}
	return problems
}

// flagReusedID marks e, a request of the agent's own, as carrying the
// correlation id of call, and returns the problem that lists it.
func flagReusedID(e, call *Event) Problem {
	what := "tool call " + orDash(call.Name)
	if call.Kind == KindResourceRead {
		what = "resource read " + orDash(call.Name)
	}
	who := "the sidecar's"
	if call.Kind == KindAgentToolCall {
		who = "the agent's record of"
	}
	e.Warning = fmt.Sprintf("reused correlation id: the agent's own request carries the id of %s %s (event %d); not linked to it", who, what, call.Seq)
	e.Summary += " [the agent's own request, carrying " + what + "'s correlation id]"
	scope := e.Scope
	if scope == "" {
		scope = "none"
	}
	return Problem{File: e.File, Line: e.Line, Message: fmt.Sprintf(
		"a request from the agent (client %s, scope %s) carries the correlation id %s of %s %s (event %d): the workload tried to file its own egress under a tool call; shown as the agent's own",
		orDash(e.Client), scope, e.CorrelationID, who, what, call.Seq)}
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
