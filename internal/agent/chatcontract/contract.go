// Package chatcontract checks a Chat Completions request (POST
// /v1/chat/completions) against what OpenAI's service refuses, and answers
// a refusal the way the service does: HTTP 400 with
// {"error":{"message","type":"invalid_request_error","param","code"}}.
//
// Every fake model in the project runs [Validate] on every request, so a
// test whose agent sends what the real service would refuse fails, instead
// of passing against a fake that accepts anything (issue 13: the sidecar's
// tool schema without "properties" passed every test and would have been
// refused by OpenAI on the first request).
//
// The rules come from OpenAI's API reference and OpenAPI document
// (openai/openai-openapi: CreateChatCompletionRequest, ChatCompletionTool,
// FunctionObject, FunctionParameters, the ChatCompletionRequest*Message
// schemas) and from the refusals users report with the service's own
// words and codes:
//
//   - model is required; only the request fields of the reference are known;
//   - at most 128 tools ("array_above_max_length"); each of type "function"
//     with a name matching ^[a-zA-Z0-9_-]{1,64}$ and a description of at most
//     1024 characters ("string_above_max_length");
//   - parameters, when present, an object schema ("type": "object") that
//     declares "properties" ("invalid_function_parameters", "object schema
//     missing properties", as in langchain-ai/langchain-mcp-adapters#137 and
//     spring-projects/spring-ai#4776);
//   - roles system, developer, user, assistant, tool (and the legacy
//     function); only the message fields of the reference;
//   - content required, except an assistant message's with tool_calls; a
//     tool message's content is a string or an array of text parts;
//   - every tool_call_id of an assistant message answered by exactly one tool
//     message before the next assistant or user message, and no tool message
//     that answers no pending call.
//
// It checks only the request's shape; it must not make network calls, and
// it is for fakes: the agent itself never depends on it at run time.
package chatcontract

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"unicode/utf8"
)

// Limits of the service.
const (
	MaxTools           = 128
	MaxDescription     = 1024
	maxFunctionName    = 64
	typeInvalidRequest = "invalid_request_error"
)

// functionName is the service's pattern for function names.
var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// requestFields are CreateChatCompletionRequest's properties.
var requestFields = []string{
	"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call",
	"temperature", "top_p", "n", "stream", "stream_options", "stop", "max_tokens", "max_completion_tokens",
	"presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user",
	"response_format", "seed", "service_tier", "store", "metadata", "modalities", "audio", "prediction",
	"reasoning_effort", "web_search_options", "verbosity", "prompt_cache_key", "safety_identifier",
}

// messageFields are the union of the request message schemas' properties.
var messageFields = []string{"role", "content", "name", "tool_calls", "tool_call_id", "function_call", "refusal", "audio"}

var roles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// Error is the service's error object.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *Error) Error() string { return e.Message }

// refuse builds an invalid_request_error; empty param or code are null.
func refuse(param, code, format string, args ...any) *Error {
	e := &Error{Message: fmt.Sprintf(format, args...), Type: typeInvalidRequest}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

// WriteError answers e as the service does: 400 and {"error": e}.
func WriteError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]*Error{"error": e})
}

// Validate checks one request body; nil means the service would take it.
func Validate(body []byte) *Error {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		return refuse("", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly.)")
	}
	for k := range req {
		if !slices.Contains(requestFields, k) {
			return refuse(k, "unknown_parameter", "Unrecognized request argument supplied: %s", k)
		}
	}
	var model string
	if json.Unmarshal(req["model"], &model) != nil || model == "" {
		return refuse("model", "", "you must provide a model parameter")
	}
	if e := checkTools(req["tools"]); e != nil {
		return e
	}
	return checkMessages(req["messages"])
}

// fn is FunctionObject.
type fn struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

func checkTools(raw json.RawMessage) *Error {
	if raw == nil {
		return nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function *fn    `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return refuse("tools", "invalid_type", "Invalid type for 'tools': expected an array of tool objects.")
	}
	if len(tools) > MaxTools {
		return refuse("tools", "array_above_max_length",
			"Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", MaxTools, len(tools))
	}
	for i, t := range tools {
		p := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return refuse(p+".type", "invalid_value", "Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)
		}
		if t.Function == nil {
			return refuse(p+".function", "missing_required_parameter", "Missing required parameter: '%s.function'.", p)
		}
		if e := checkFunction(p+".function", *t.Function); e != nil {
			return e
		}
	}
	return nil
}

func checkFunction(p string, f fn) *Error {
	switch {
	case f.Name == nil:
		return refuse(p+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", p)
	case utf8.RuneCountInString(*f.Name) > maxFunctionName:
		return refuse(p+".name", "string_above_max_length",
			"Invalid '%s.name': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", p, maxFunctionName, utf8.RuneCountInString(*f.Name))
	case !functionName.MatchString(*f.Name):
		return refuse(p+".name", "invalid_value",
			"Invalid '%s.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", p)
	case f.Description != nil && utf8.RuneCountInString(*f.Description) > MaxDescription:
		return refuse(p+".description", "string_above_max_length",
			"Invalid '%s.description': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", p, MaxDescription, utf8.RuneCountInString(*f.Description))
	}
	return checkParameters(p+".parameters", *f.Name, f.Parameters)
}

// checkParameters: absent means no parameters; present, a JSON Schema
// object of type "object" that declares its properties.
func checkParameters(p, name string, raw json.RawMessage) *Error {
	if raw == nil {
		return nil
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return refuse(p, "invalid_type", "Invalid type for '%s': expected an object, but got %s instead.", p, jsonKind(raw))
	}
	var typ string
	json.Unmarshal(schema["type"], &typ)
	if typ != "object" {
		return refuse(p, "invalid_function_parameters",
			"Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%s\"'.", name, orNone(typ))
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(schema["properties"], &props); err != nil || props == nil {
		return refuse(p, "invalid_function_parameters", "Invalid schema for function '%s': In context=(), object schema missing properties.", name)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

func jsonKind(raw json.RawMessage) string {
	var v any
	json.Unmarshal(raw, &v)
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return "an object"
}
