package egress

import "github.com/mcpsidecar/mcpsidecar/internal/trace"

// traceID returns the run's correlation id, the trace-id of a request's
// traceparent, or "" (the one rule is internal/trace's: lower-case hex
// only, the first value counts).
func traceID(values []string) string { return trace.FirstID(values) }
