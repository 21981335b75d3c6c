package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC error codes the front answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeServerBusy     = -32000
)

// rpcMessage is the part of a JSON-RPC message the front needs.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (m rpcMessage) auditable() bool {
	return m.Method == KindToolCall || m.Method == KindResourceRead
}

// rejection is a request the front refuses itself, with the JSON-RPC error
// it answers and the HTTP status it uses.
type rejection struct {
	status int
	code   int
	msg    string
	id     json.RawMessage
}

// front is the HTTP layer in front of the SDK's streamable handler. It
// bounds the body, refuses what the SDK would refuse before the audit
// middleware runs (unparsable JSON, malformed tools/call or resources/read
// params, sessions over the limit) with a JSON-RPC error, and records each
// such refusal, so every call reaches the audit log exactly once.
func (s *Sidecar) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			s.refuseBody(w, r, start, body, err)
			return
		}
		msgs, perr := parseMessages(body)
		if perr != nil {
			s.refuse(w, r, start, nil, rejection{http.StatusBadRequest, codeParseError, "parse error: " + perr.Error(), nil}, body)
			return
		}
		ci := connOf(r)
		if !ci.admitted {
			w.Header().Set("Connection", "close") // free the slot for an admitted client
			s.refuse(w, r, start, msgs, rejection{http.StatusServiceUnavailable, codeServerBusy,
				fmt.Sprintf("too many concurrent sessions: the sidecar serves at most %d; retry later", s.cfg.MaxSessions), nil}, body)
			return
		}
		if rej := precheck(msgs); rej != nil {
			s.refuse(w, r, start, msgs, *rej, body)
			return
		}
		s.forward(next, w, r, ci, msgs, body)
	})
}

func (s *Sidecar) forward(next http.Handler, w http.ResponseWriter, r *http.Request, ci *connInfo, msgs []rpcMessage, body []byte) {
	start := time.Now()
	r.Header.Del(headerAuditToken)
	// The audit session id is the connection's id. Stateless MCP has no
	// session of its own, and a client-sent Mcp-Session-Id is never issued
	// or checked here: trusting it would let a client write another
	// client's session id into the audit log.
	r.Header.Set(headerSession, ci.id)
	var token string
	auditable := countAuditable(msgs)
	if s.audit != nil && auditable > 0 {
		token = s.pending.add(auditable)
		r.Header.Set(headerAuditToken, token)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	next.ServeHTTP(sw, r)
	if token == "" {
		return
	}
	if missing := s.pending.finish(token); missing > 0 {
		rej := rejection{status: sw.status, msg: fmt.Sprintf("refused by the MCP transport before dispatch (HTTP %d)", sw.status)}
		s.recordRefused(r, start, lastAuditable(msgs, missing), rej)
	}
}

// parseMessages decodes a single JSON-RPC message or a batch.
func parseMessages(body []byte) ([]rpcMessage, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errors.New("empty body")
	}
	if trimmed[0] == '[' {
		var batch []rpcMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return nil, err
		}
		if len(batch) == 0 {
			return nil, errors.New("empty batch")
		}
		return batch, nil
	}
	var m rpcMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return nil, err
	}
	return []rpcMessage{m}, nil
}

// precheck refuses tools/call and resources/read messages whose params the
// SDK would reject before the audit middleware.
func precheck(msgs []rpcMessage) *rejection {
	for _, m := range msgs {
		if !m.auditable() {
			continue
		}
		if len(m.ID) == 0 || string(m.ID) == "null" {
			return &rejection{http.StatusBadRequest, codeInvalidRequest, fmt.Sprintf("invalid request: %s must carry an id", m.Method), nil}
		}
		if len(m.Params) == 0 || string(m.Params) == "null" {
			return &rejection{http.StatusOK, codeInvalidParams, fmt.Sprintf("invalid params: %s requires \"params\"", m.Method), m.ID}
		}
		var err error
		if m.Method == KindToolCall {
			err = json.Unmarshal(m.Params, &mcp.CallToolParamsRaw{})
		} else {
			err = json.Unmarshal(m.Params, &mcp.ReadResourceParams{})
		}
		if err != nil {
			return &rejection{http.StatusOK, codeInvalidParams, fmt.Sprintf("invalid params for %s: %v", m.Method, err), m.ID}
		}
	}
	return nil
}

func (s *Sidecar) refuseBody(w http.ResponseWriter, r *http.Request, start time.Time, partial []byte, err error) {
	rej := rejection{http.StatusBadRequest, codeInvalidRequest, "reading request body: " + err.Error(), nil}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		rej = rejection{http.StatusRequestEntityTooLarge, codeInvalidRequest,
			fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), nil}
		w.Header().Set("Connection", "close") // the rest of the body is not read
	}
	s.refuse(w, r, start, nil, rej, partial)
}

// refuse answers a JSON-RPC error and records the refused calls. When the
// messages are unknown (unparsable or oversized body), one invalid_request
// record holds a preview of the body.
func (s *Sidecar) refuse(w http.ResponseWriter, r *http.Request, start time.Time, msgs []rpcMessage, rej rejection, body []byte) {
	if rej.id == nil && len(msgs) == 1 {
		rej.id = msgs[0].ID
	}
	writeRPCError(w, rej)
	if msgs == nil {
		s.audit.Write(Record{
			Time: timestamp(start), SessionID: connOf(r).id, Kind: KindInvalid,
			Arguments: body[:min(len(body), maxArgumentBytes+1)], Error: rej.msg,
			DurationMS: millis(time.Since(start)), CorrelationID: correlationOf(r),
		})
		return
	}
	s.recordRefused(r, start, filterAuditable(msgs), rej)
}

func (s *Sidecar) recordRefused(r *http.Request, start time.Time, msgs []rpcMessage, rej rejection) {
	for _, m := range msgs {
		name, args := nameAndArgs(m)
		s.audit.Write(Record{
			Time: timestamp(start), SessionID: connOf(r).id, Kind: m.Method, Name: name,
			Arguments: args, Error: rej.msg, DurationMS: millis(time.Since(start)), CorrelationID: correlationOf(r),
		})
	}
}

// nameAndArgs digs the tool name / URI and the arguments out of params that
// may be malformed; whatever cannot be read stays empty.
func nameAndArgs(m rpcMessage) (string, json.RawMessage) {
	var p struct {
		Name      json.RawMessage `json:"name"`
		URI       json.RawMessage `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &p)
	raw := p.Name
	if m.Method == KindResourceRead {
		raw, p.Arguments = p.URI, m.Params
	}
	var name string
	if json.Unmarshal(raw, &name) != nil {
		name = string(raw)
	}
	return name, p.Arguments
}

func correlationOf(r *http.Request) string {
	if id := traceIDFromHeader(r.Header.Get(HeaderTraceparent)); id != "" {
		return id
	}
	return newTraceID()
}

func writeRPCError(w http.ResponseWriter, rej rejection) {
	id := rej.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": rej.code, "message": rej.msg},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rej.status)
	_, _ = w.Write(body)
}

func countAuditable(msgs []rpcMessage) int { return len(filterAuditable(msgs)) }

func filterAuditable(msgs []rpcMessage) []rpcMessage {
	var out []rpcMessage
	for _, m := range msgs {
		if m.auditable() {
			out = append(out, m)
		}
	}
	return out
}

func lastAuditable(msgs []rpcMessage, n int) []rpcMessage {
	a := filterAuditable(msgs)
	return a[max(0, len(a)-n):]
}

// statusWriter remembers the status the SDK answered with. It forwards
// Flush (SSE responses need it) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// pendingCalls tracks, per forwarded HTTP request, how many auditable calls
// have not reached the audit middleware (which then records them itself).
type pendingCalls struct {
	next atomic.Uint64
	m    sync.Map // token -> *atomic.Int64 (calls not yet recorded)
}

func (p *pendingCalls) add(n int) string {
	token := strconv.FormatUint(p.next.Add(1), 36)
	c := new(atomic.Int64)
	c.Store(int64(n))
	p.m.Store(token, c)
	return token
}

func (p *pendingCalls) done(token string) {
	if token == "" {
		return
	}
	if c, ok := p.m.Load(token); ok {
		c.(*atomic.Int64).Add(-1)
	}
}

// finish forgets token and returns how many calls were never recorded.
func (p *pendingCalls) finish(token string) int {
	c, ok := p.m.LoadAndDelete(token)
	if !ok {
		return 0
	}
	return int(max(0, c.(*atomic.Int64).Load()))
}

// connInfo is what the server knows about one client connection: its id
// (the audit session id when the client sends no Mcp-Session-Id) and
// whether it was admitted under the session limit.
type connInfo struct {
	id       string
	admitted bool
}

type connKey struct{}

func connFrom(ctx context.Context) *connInfo {
	if ci, ok := ctx.Value(connKey{}).(*connInfo); ok {
		return ci
	}
	return &connInfo{admitted: true}
}

// connOf is the request's connection; served by another http.Server
// (tests, embedding) it is named after the remote address.
func connOf(r *http.Request) *connInfo {
	ci := connFrom(r.Context())
	if ci.id == "" {
		return &connInfo{id: "remote-" + r.RemoteAddr, admitted: ci.admitted}
	}
	return ci
}

// connContext admits a new connection under the session limit.
func (s *Sidecar) connContext(ctx context.Context, _ net.Conn) context.Context {
	n := s.conns.Add(1)
	ci := &connInfo{id: "conn-" + randomHex(6), admitted: s.cfg.MaxSessions <= 0 || n <= int64(s.cfg.MaxSessions)}
	return context.WithValue(ctx, connKey{}, ci)
}

func (s *Sidecar) connState(_ net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		s.conns.Add(-1)
	}
}
