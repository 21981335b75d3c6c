package otelexport

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// Attribute names of our own, under mcpsidecar.*; the OpenTelemetry
// semantic conventions' where they exist (GenAI: gen_ai.*; MCP:
// mcp.method.name; HTTP and network: http.request.method,
// server.address, server.port).
const (
	attrCorrelation = "mcpsidecar.correlation_id"
	attrSource      = "mcpsidecar.source"
	attrDecision    = "mcpsidecar.egress.decision"
	attrRule        = "mcpsidecar.egress.rule"
	attrReason      = "mcpsidecar.egress.reason"
	attrResolved    = "mcpsidecar.egress.resolved_ip"
	attrScope       = "mcpsidecar.egress.scope"
	attrCredential  = "mcpsidecar.egress.credential"
	attrBytesUp     = "mcpsidecar.egress.bytes_up"
	attrBytesDown   = "mcpsidecar.egress.bytes_down"
	attrError       = "error.type"
)

// describe is e's span name, kind and attributes.
func describe(e *timeline.Event) (string, trace.SpanKind, []attribute.KeyValue) {
	a := []attribute.KeyValue{attribute.String(attrSource, e.Source), attribute.String("mcpsidecar.event.kind", e.Kind)}
	if e.CorrelationID != "" {
		a = append(a, attribute.String(attrCorrelation, e.CorrelationID))
	}
	if e.Error != "" {
		a = append(a, attribute.String(attrError, "mcpsidecar.failed"), attribute.String("mcpsidecar.error", e.Error))
	}
	switch e.Kind {
	case timeline.KindModelRequest:
		a = append(a, attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", e.Model),
			attribute.Int("mcpsidecar.agent.turn", e.Turn), attribute.StringSlice("mcpsidecar.agent.tools_offered", e.ToolsRequested))
		return "chat " + e.Model, trace.SpanKindClient, a
	case timeline.KindAgentToolCall:
		a = append(a, attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", e.Name))
		return "execute_tool " + e.Name, trace.SpanKindClient, a
	case timeline.KindToolCall:
		a = append(a, attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", e.Name),
			attribute.String("mcp.session.id", e.SessionID))
		return "tools/call " + e.Name, trace.SpanKindServer, a
	case timeline.KindResourceRead:
		a = append(a, attribute.String("mcp.method.name", "resources/read"), attribute.String("mcp.resource.uri", e.Name),
			attribute.String("mcp.session.id", e.SessionID))
		return "resources/read " + e.Name, trace.SpanKindServer, a
	case timeline.KindEgress:
		a = append(a, attribute.String(attrDecision, e.Decision), attribute.String("http.request.method", e.Method),
			attribute.String("server.address", e.Host), attribute.Int("server.port", port(e.Port)),
			attribute.String(attrResolved, e.ResolvedIP), attribute.String(attrRule, e.Rule), attribute.String(attrReason, e.Reason),
			attribute.String(attrScope, e.Scope), attribute.String(attrCredential, e.Credential),
			attribute.Int64(attrBytesUp, e.BytesUp), attribute.Int64(attrBytesDown, e.BytesDown))
		return "egress " + e.Decision + " " + e.Method + " " + e.Host, trace.SpanKindClient, a
	}
	a = append(a, attribute.String("mcpsidecar.event.name", e.Name), attribute.String("mcpsidecar.event.summary", e.Summary))
	return e.Kind + " " + e.Name, trace.SpanKindInternal, a
}
