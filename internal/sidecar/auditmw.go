package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Internal headers the HTTP front sets on each request before the MCP
// handler sees it. Client-supplied copies are always overwritten, so a
// client cannot choose another session's id or silence the audit fallback.
const (
	headerSession    = "X-Mcpsidecar-Session"
	headerAuditToken = "X-Mcpsidecar-Audit-Token"
)

// auditMiddleware is the server's receiving middleware: it gives every
// tools/call and resources/read its correlation id and writes exactly one
// audit record for it, whatever the outcome (unknown tools and argument
// validation errors are decided by the SDK after this point, so they pass
// through here too). A tools/call also gets a [KindCallStart] line before
// it runs, and its end line is marked interrupted when shutdown cut it off
// (inflight.go). Requests the SDK refuses before dispatch are recorded by
// the HTTP front instead.
func (s *Sidecar) auditMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		rec, ok := newRecord(req)
		if !ok {
			return next(ctx, method, req)
		}
		hdr := headerOf(req)
		// From here on this middleware owns the record; tell the HTTP front
		// now, not at the end, so a client that hangs up mid-call cannot
		// make the front record the same call a second time.
		s.pending.done(hdr.Get(headerAuditToken))
		corr := traceIDFromHeader(hdr.Get(HeaderTraceparent))
		if corr == "" {
			corr = newTraceID()
		}
		ctx = withTraceID(ctx, corr)
		start := time.Now()
		if s.audit == nil {
			return next(ctx, method, req)
		}
		if err := s.audit.Full(); err != nil {
			return nil, refusedFull(err)
		}
		rec.Time = timestamp(start)
		rec.CorrelationID = corr
		rec.SessionID = sessionOf(req, hdr)
		var call *inflight
		if rec.Kind == KindToolCall {
			rec.Server = s.serverOf(rec.Name)
			// The start line is written before the call can send
			// anything upstream; shutdown cancels ctx. A start line
			// that cannot be written refuses the call.
			var err error
			if ctx, call, err = s.calls.begin(ctx, s.audit, rec, start); err != nil {
				return nil, refusedFull(err)
			}
		}
		res, err := next(ctx, method, req)
		rec.OK, rec.Error, rec.ResultPreview = outcome(res, err)
		if call == nil {
			rec.DurationMS = millis(time.Since(start))
			s.audit.Write(rec)
			return res, err
		}
		cut := ctx.Err() != nil
		s.calls.finish(call, func(stopping bool) {
			if stopping && cut && !rec.OK {
				s.audit.Write(interruptedRecord(call, time.Now(), "the sidecar stopped during the call and cancelled it ("+orNone(rec.Error)+")"))
				return
			}
			rec.DurationMS = millis(time.Since(start))
			s.audit.Write(rec)
		})
		return res, err
	}
}

// refusedFull is the error of a call refused because the audit log is
// full (or failed): it is not sent anywhere, and the log's last line says
// so. The threat: a call that reaches an MCP server with no audit line.
func refusedFull(why error) error {
	return fmt.Errorf("%s (%v)", ReasonAuditFull, why)
}

func orNone(s string) string {
	if s == "" {
		return "no error returned"
	}
	return s
}

func newRecord(req mcp.Request) (Record, bool) {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		return Record{Kind: KindToolCall, Name: r.Params.Name, Arguments: r.Params.Arguments}, true
	case *mcp.ReadResourceRequest:
		return Record{Kind: KindResourceRead, Name: r.Params.URI, Arguments: mustMarshal(map[string]string{"uri": r.Params.URI})}, true
	}
	return Record{}, false
}

func headerOf(req mcp.Request) http.Header {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header
	}
	return http.Header{}
}

func sessionOf(req mcp.Request, hdr http.Header) string {
	if id := hdr.Get(headerSession); id != "" {
		return id
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		return ss.ID()
	}
	return ""
}

// outcome summarises a result for the audit record: ok, error text, preview.
func outcome(res mcp.Result, err error) (bool, string, string) {
	if err != nil {
		return false, err.Error(), ""
	}
	switch r := res.(type) {
	case *mcp.CallToolResult:
		text := contentText(r.Content)
		if r.IsError {
			return false, text, text
		}
		return true, "", text
	case *mcp.ReadResourceResult:
		var b strings.Builder
		for _, c := range r.Contents {
			b.WriteString(c.Text)
		}
		return true, "", b.String()
	}
	return true, "", ""
}

// contentText concatenates the text of a result, bounded so that a huge
// result is not copied just to be cut to a 500-character preview.
func contentText(cs []mcp.Content) string {
	const limit = 4 * MaxPreviewChars
	var b strings.Builder
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(t.Text[:min(len(t.Text), limit)])
		}
		if b.Len() >= limit {
			break
		}
	}
	return b.String()
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
