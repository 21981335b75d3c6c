package fakemodel

import (
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// SearchQuery is the query the scripted model searches with.
const SearchQuery = "HttpClient IHttpClientFactory .NET 8"

// reply decides the next assistant message from the conversation so far.
func (s *Server) reply(msgs []openai.ChatCompletionMessage) openai.ChatCompletionMessage {
	results := toolResults(msgs)
	n := len(results)
	switch s.behaviour {
	case UnknownTool:
		k := toolMessages(msgs)
		return call(k, "run_shell", fmt.Sprintf(`{"cmd":"id %d"}`, k))
	case Malformed:
		return call(n, toolSearch, `{"query": "HttpClient", "language": csharp`)
	case Loop:
		return call(n, toolSearch, `{"query":"HttpClient","language":"csharp"}`)
	case NeverSave:
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "Use IHttpClientFactory."}
	case Sloppy:
		// Like local reasoning models, it adds reasoning_content, which
		// must not be sent back (OpenAI refuses unknown message fields).
		m := sloppy(msgs, results)
		m.ReasoningContent = "thinking about the next step"
		return m
	case Direct:
		if _, saved := results[toolSave]; !saved {
			return call(n, toolSave, mustJSON(map[string]string{"text": DirectAnswer}))
		}
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "Saved."}
	}
	return s.task(results)
}

// sloppy plays the task with a mistake at each step before the right call;
// the step is the number of tool results so far.
func sloppy(msgs []openai.ChatCompletionMessage, results map[string]string) openai.ChatCompletionMessage {
	n := toolMessages(msgs)
	switch n {
	case 0:
		return call(n, toolFormat, `{"verbose":true}`)
	case 1:
		return call(n, toolSearch, `{"query":5,"language":"csharp"}`)
	case 2:
		return call(n, toolSearch, `{"query": "HttpClient", "language": csharp`)
	case 3:
		return call(n, "search_web", `{"q":"HttpClient"}`)
	case 4:
		return call(n, toolSearch, mustJSON(map[string]string{"query": SearchQuery, "language": "csharp"}))
	case 5:
		text := Answer(results[toolFormat], results[toolSearch])
		return call(n, toolSave, mustJSON(map[string]string{"text": text, "answer": text}))
	}
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "The answer is saved."}
}

// task plays the seed's workload step by step.
func (s *Server) task(results map[string]string) openai.ChatCompletionMessage {
	n := len(results)
	format, haveFormat := results[toolFormat]
	sample, haveSample := results[toolSearch]
	_, saved := results[toolSave]
	switch {
	case !haveFormat:
		return call(n, toolFormat, `{}`)
	case !haveSample:
		return call(n, toolSearch, mustJSON(map[string]string{"query": SearchQuery, "language": "csharp"}))
	case !saved && s.behaviour == Oversized:
		return call(n, toolSave, mustJSON(map[string]string{"text": strings.Repeat("HttpClient ", 1<<14)}))
	case !saved:
		return call(n, toolSave, mustJSON(map[string]string{"text": Answer(format, sample)}))
	}
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "The answer is saved."}
}

// Answer composes the scripted answer from the format and the search
// result; deterministic, so tests can compare it.
func Answer(format, sample string) string {
	return "Obtain HttpClient instances from IHttpClientFactory (register it with " +
		"builder.Services.AddHttpClient() and inject IHttpClientFactory or a typed client), " +
		"instead of creating and disposing new HttpClient objects per request.\n\n" +
		fmt.Sprintf("Format followed: %d bytes. Sample evidence: %s\n", len(format), firstLine(sample))
}

// toolMessages counts the tool results so far.
func toolMessages(msgs []openai.ChatCompletionMessage) int {
	n := 0
	for _, m := range msgs {
		if m.Role == openai.ChatMessageRoleTool {
			n++
		}
	}
	return n
}

// toolResults maps each tool name answered so far to its (last) result.
func toolResults(msgs []openai.ChatCompletionMessage) map[string]string {
	names := map[string]string{}
	out := map[string]string{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Function.Name
		}
		if m.Role == openai.ChatMessageRoleTool {
			out[names[m.ToolCallID]] = m.Content
		}
	}
	return out
}

func call(n int, name, args string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{
		ID: fmt.Sprintf("call_%d", n+1), Type: openai.ToolTypeFunction,
		Function: openai.FunctionCall{Name: name, Arguments: args},
	}}}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
