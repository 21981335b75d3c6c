package chatcontract

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// message is a request message, its content kept raw: its shape depends
// on the role.
type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      *string `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

// checkMessages checks each message, then the order of calls and answers.
func checkMessages(raw json.RawMessage) *Error {
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || msgs == nil {
		return refuse("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	if len(msgs) == 0 {
		return refuse("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	var pending []string // tool_call_ids not answered yet
	var pendingAt int
	for i, rawMsg := range msgs {
		m, calls, e := checkMessage(i, rawMsg)
		if e != nil {
			return e
		}
		if m.Role == "tool" {
			at := slices.Index(pending, *m.ToolCallID)
			if at < 0 {
				return refuse(fmt.Sprintf("messages.[%d].role", i), "",
					"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			pending = slices.Delete(pending, at, at+1)
			continue
		}
		if len(pending) > 0 {
			return unanswered(pendingAt, pending)
		}
		pending, pendingAt = calls, i
	}
	if len(pending) > 0 {
		return unanswered(pendingAt, pending)
	}
	return nil
}

func unanswered(i int, ids []string) *Error {
	return refuse(fmt.Sprintf("messages.[%d].role", i), "",
		"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
		strings.Join(ids, ", "))
}

// checkMessage checks one message's fields and content; for an assistant
// message it returns the ids of its tool calls.
func checkMessage(i int, raw json.RawMessage) (message, []string, *Error) {
	p := fmt.Sprintf("messages[%d]", i)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return message{}, nil, refuse(p, "invalid_type", "Invalid type for '%s': expected an object, but got %s instead.", p, jsonKind(raw))
	}
	for k := range fields {
		if !slices.Contains(messageFields, k) {
			return message{}, nil, refuse(p, "", "Additional properties are not allowed ('%s' was unexpected) - 'messages.%d'", k, i)
		}
	}
	var m message
	json.Unmarshal(raw, &m)
	if !slices.Contains(roles, m.Role) {
		return m, nil, refuse(p+".role", "invalid_value",
			"Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role)
	}
	if m.Role == "assistant" {
		return checkAssistant(p, m)
	}
	if isNull(m.Content) {
		return m, nil, refuse(p+".content", "missing_required_parameter", "Missing required parameter: '%s.content'.", p)
	}
	if m.Role == "tool" {
		if m.ToolCallID == nil {
			return m, nil, refuse(p+".tool_call_id", "missing_required_parameter", "Missing required parameter: '%s.tool_call_id'.", p)
		}
		return m, nil, checkTextContent(p+".content", m.Content)
	}
	if m.ToolCallID != nil || m.ToolCalls != nil {
		return m, nil, refuse(p, "", "Additional properties are not allowed - '%s' (tool_calls and tool_call_id belong to assistant and tool messages)", p)
	}
	return m, nil, checkContent(p+".content", m.Content)
}

// checkAssistant: content may be null or absent only with tool calls.
func checkAssistant(p string, m message) (message, []string, *Error) {
	var calls []toolCall
	if !isNull(m.ToolCalls) {
		if err := json.Unmarshal(m.ToolCalls, &calls); err != nil {
			return m, nil, refuse(p+".tool_calls", "invalid_type", "Invalid type for '%s.tool_calls': expected an array of tool calls.", p)
		}
	}
	if isNull(m.Content) && len(calls) == 0 {
		return m, nil, refuse(p+".content", "missing_required_parameter",
			"Missing required parameter: '%s.content'. (An assistant message needs content unless it has tool_calls.)", p)
	}
	if !isNull(m.Content) {
		if e := checkContent(p+".content", m.Content); e != nil {
			return m, nil, e
		}
	}
	var ids []string
	for j, c := range calls {
		cp := fmt.Sprintf("%s.tool_calls[%d]", p, j)
		switch {
		case c.ID == "":
			return m, nil, refuse(cp+".id", "missing_required_parameter", "Missing required parameter: '%s.id'.", cp)
		case c.Type != "function":
			return m, nil, refuse(cp+".type", "invalid_value", "Invalid value: '%s'. Supported values are: 'function'.", c.Type)
		case c.Function == nil || c.Function.Name == nil || c.Function.Arguments == nil:
			return m, nil, refuse(cp+".function", "missing_required_parameter", "Missing required parameter: '%s.function' with name and arguments.", cp)
		case slices.Contains(ids, c.ID):
			return m, nil, refuse(cp+".id", "", "Duplicate value for 'tool_call_id' of %s in message[%s].", c.ID, p)
		}
		ids = append(ids, c.ID)
	}
	return m, ids, nil
}

// checkContent: a string, or a non-empty array of typed parts.
func checkContent(p string, raw json.RawMessage) *Error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) == 0 {
		return refuse(p, "invalid_type", "Invalid type for '%s': expected one of a string or array of objects, but got %s instead.", p, jsonKind(raw))
	}
	for j, part := range parts {
		if part.Type == "" {
			return refuse(fmt.Sprintf("%s[%d].type", p, j), "missing_required_parameter", "Missing required parameter: '%s[%d].type'.", p, j)
		}
	}
	return nil
}

// checkTextContent: a tool message's content, a string or text parts only.
func checkTextContent(p string, raw json.RawMessage) *Error {
	if e := checkContent(p, raw); e != nil {
		return e
	}
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil // a string
	}
	for j, part := range parts {
		if part.Type != "text" {
			return refuse(fmt.Sprintf("%s[%d].type", p, j), "invalid_value", "Invalid value: '%s'. Supported values are: 'text'.", part.Type)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return raw == nil || string(raw) == "null"
}
