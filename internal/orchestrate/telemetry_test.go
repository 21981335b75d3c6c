package orchestrate

import (
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/otelexport"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/trace"
)

// TestAgentTraceParent: with agent_telemetry the agent gets the run's
// trace context (the run span's, so its spans join the run's trace);
// without it, no TRACEPARENT.
func TestAgentTraceParent(t *testing.T) {
	for _, relay := range []bool{true, false} {
		s := specWith(spec.CapNetwork)
		s.AgentTelemetry = relay
		in := input(t, s, WorkloadAgent)
		in.TraceParent = otelexport.RunTraceParent(in.RunID)
		p, err := NewPlan(in)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, st := range p.Containers {
			for _, e := range st.Spec.Env {
				if e.Name == spec.EnvTraceParent {
					if st.Role != RoleAgent {
						t.Errorf("%s gets %s", st.Role, e.Name)
					}
					got = e.Value
				}
			}
		}
		want := ""
		if relay {
			want = otelexport.RunTraceParent("run-2026-01-02-03-04-05")
		}
		if got != want || (relay && trace.ID(got) == "") {
			t.Errorf("agent_telemetry %v: TRACEPARENT %q, want %q (a valid traceparent)", relay, got, want)
		}
	}
}
