// Package fakemodel is a scripted OpenAI-compatible Chat Completions server
// (POST /v1/chat/completions) for tests and for the offline end-to-end
// fixture. It plays the agent's task like a well-behaved model, or one of the
// misbehaviours the agent must survive ([Behaviour]). It decides each reply
// from the conversation it is sent, so it keeps no per-run state apart from
// the flaky counter. Before anything else it checks each request against
// what OpenAI's service refuses ([chatcontract.Validate]) and answers a
// refusal as the service does (400, its error shape), so no test passes
// with a request the real service would reject. It is for tests only: it
// must never dial out and never be offered as a model.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/chatcontract"
)

// Behaviour selects how the fake model plays.
type Behaviour string

// The behaviours.
const (
	Task        Behaviour = "task"         // read the format, search csharp samples, save, finish
	UnknownTool Behaviour = "unknown-tool" // call a tool that was not offered
	Malformed   Behaviour = "malformed"    // send arguments that are not JSON
	Loop        Behaviour = "loop"         // call the same search forever
	Oversized   Behaviour = "oversized"    // save an answer far over any cap
	Flaky       Behaviour = "flaky"        // answer 500 once, then play Task
	NeverSave   Behaviour = "never-save"   // reply with text, never call save_answer
	// Sloppy makes the mistakes real models make, then corrects itself: an
	// extra key, a mistyped argument, malformed JSON, an unknown tool, and
	// a save with an extra key; every reply carries reasoning_content.
	Sloppy Behaviour = "sloppy"
	// Direct saves an answer at once, calling no other tool (a question of
	// the user's own needs none).
	Direct Behaviour = "direct"
)

// Behaviours lists every [Behaviour].
var Behaviours = []Behaviour{Task, UnknownTool, Malformed, Loop, Oversized, Flaky, NeverSave, Sloppy, Direct}

// Tool names the scripted model uses (the agent's contract).
const (
	toolFormat = "read_answer_format"
	toolSearch = "microsoft_code_sample_search"
	toolSave   = "save_answer"
)

// DirectAnswer is what [Direct] saves.
const DirectAnswer = "An answer composed without tools.\n"

// Request is what the fake saw of one request.
type Request struct {
	Authorization string
	Traceparent   string
	Model         string
	Tools         []string
}

// Server is the fake model. The zero value is not usable; use [New].
type Server struct {
	behaviour Behaviour
	key       string

	mu       sync.Mutex
	requests []Request
	refused  []string
	failed   bool
}

// Refused returns the contract refusals sent so far (each one a test bug
// or an agent bug: the real service would have answered 400).
func (s *Server) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refused)
}

func (s *Server) refuse(e *chatcontract.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = append(s.refused, e.Message)
}

// New returns a fake that plays b and, when key is not empty, refuses
// requests without "Authorization: Bearer key" (401), like the real API.
func New(b Behaviour, key string) (*Server, error) {
	if !slices.Contains(Behaviours, b) {
		return nil, fmt.Errorf("unknown behaviour %q (want one of %v)", b, Behaviours)
	}
	return &Server{behaviour: b, key: key}, nil
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ServeHTTP serves POST .../chat/completions; anything else is 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		writeError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if s.key != "" && r.Header.Get("Authorization") != "Bearer "+s.key {
		writeError(w, http.StatusUnauthorized, "incorrect API key provided")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading request: "+err.Error())
		return
	}
	// The real service's contract first: a request it would refuse is
	// refused here the same way, so no test passes against a laxer fake.
	if e := chatcontract.Validate(body); e != nil {
		s.refuse(e)
		chatcontract.WriteError(w, e)
		return
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "decoding request: "+err.Error())
		return
	}
	if s.note(r, req) {
		writeError(w, http.StatusInternalServerError, "scripted transient failure")
		return
	}
	msg := s.reply(req.Messages)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-fake", Object: "chat.completion", Model: req.Model,
		Choices: []openai.ChatCompletionChoice{{Message: msg, FinishReason: finish(msg)}},
	})
}

// note records the request and reports whether to fail it (Flaky, once).
func (s *Server) note(r *http.Request, req openai.ChatCompletionRequest) bool {
	rec := Request{Authorization: r.Header.Get("Authorization"), Traceparent: r.Header.Get("Traceparent"), Model: req.Model}
	for _, t := range req.Tools {
		if t.Function != nil {
			rec.Tools = append(rec.Tools, t.Function.Name)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
	if s.behaviour == Flaky && !s.failed {
		s.failed = true
		return true
	}
	return false
}

func finish(m openai.ChatCompletionMessage) openai.FinishReason {
	if len(m.ToolCalls) > 0 {
		return openai.FinishReasonToolCalls
	}
	return openai.FinishReasonStop
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}
