package timeline

// KindCallStart is the event of a sidecar "call_start" audit line: a
// tools/call began (its arguments were recorded before anything was sent
// upstream). [ParseLine] returns it as it comes, for live progress; [Build]
// folds it into the call's own event (foldCallStarts).
const KindCallStart = "call_start"

// auditCallStart is the audit line kind the sidecar writes when a
// tools/call starts.
const auditCallStart = "call_start"

// auditLogFull is the audit line kind the sidecar writes, last, when its
// log filled.
const auditLogFull = "log_full"

// noEndLine is the error of a call the audit shows started and never
// ended: the sidecar died (was killed) with the call in flight.
const noEndLine = "started, but the audit has no end line: the sidecar stopped (or was killed) with the call in flight"

// foldCallStarts removes each call_start event whose call has its end line
// (same correlation id and name: the end line carries the start time and
// the duration, so nothing is lost), and turns a start with no end line
// into the call's event, failed, with a problem. The threat: a call cut
// off by a killed sidecar reached an MCP server; the record must show it,
// not drop it.
func (b *builder) foldCallStarts() {
	ended := map[string]string{}
	for _, e := range b.t.Events {
		if e.Source == SourceSidecar && e.Kind == KindToolCall && e.CorrelationID != "" {
			ended[e.CorrelationID] = e.Name
		}
	}
	kept := b.t.Events[:0]
	for _, e := range b.t.Events {
		if e.Kind != KindCallStart {
			kept = append(kept, e)
			continue
		}
		if name, ok := ended[e.CorrelationID]; ok && e.CorrelationID != "" && name == e.Name {
			continue
		}
		e.Kind, e.OK, e.Error = KindToolCall, false, noEndLine
		e.Summary = "tool call " + orDash(e.Name) + " failed: " + noEndLine
		b.r.problem(e.File, e.Line, "tool call %s (correlation id %s) started and has no end line", orDash(e.Name), orDash(e.CorrelationID))
		kept = append(kept, e)
	}
	b.t.Events = kept
}
