package chatcontract

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// Pieces of requests, combined in the table below.
const (
	sys       = `{"role":"system","content":"s"}`
	user      = `{"role":"user","content":"q"}`
	callA     = `{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	callAB    = `{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]}`
	answerA   = `{"role":"tool","tool_call_id":"a","content":"r"}`
	answerB   = `{"role":"tool","tool_call_id":"b","content":[{"type":"text","text":"r"}]}`
	assistant = `{"role":"assistant","content":"done"}`
	okTool    = `{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}`
)

func req(msgs string, extra ...string) string {
	s := `{"model":"gpt-4.1-mini","messages":[` + msgs + `]`
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

func tools(ts ...string) string { return `"tools":[` + strings.Join(ts, ",") + `]` }

func fnTool(name, params string) string {
	return `{"type":"function","function":{"name":"` + name + `","parameters":` + params + `}}`
}

func TestValidate(t *testing.T) {
	many := strings.TrimSuffix(strings.Repeat(okTool+",", MaxTools+1), ",")
	atMost := strings.TrimSuffix(strings.Repeat(okTool+",", MaxTools), ",")
	tests := []struct {
		name, body string
		code       string // "" with want: accepted
		want       string // substring of the message; "" accepted
	}{
		{"plain question", req(sys + "," + user), "", ""},
		{"developer role and parts", req(`{"role":"developer","content":[{"type":"text","text":"d"}]},` + user), "", ""},
		{"calls answered in any order", req(user+","+callAB+","+answerB+","+answerA+","+assistant, tools(okTool)), "", ""},
		{"assistant null content with calls", req(user + "," + callA + "," + answerA), "", ""},
		{"tool without parameters", req(user, tools(`{"type":"function","function":{"name":"f"}}`)), "", ""},
		{"128 tools", req(user, tools(atMost)), "", ""},
		{"go-openai's stream false", req(user, `"stream":false`), "", ""},
		{"known options", req(user, `"temperature":0.2,"tool_choice":"auto","parallel_tool_calls":true,"max_completion_tokens":50`), "", ""},

		{"not JSON", `{`, "", "could not parse the JSON body"},
		{"no model", `{"messages":[` + user + `]}`, "", "you must provide a model parameter"},
		{"unknown field", req(user, `"chat_template_kwargs":{}`), "unknown_parameter", "Unrecognized request argument supplied: chat_template_kwargs"},
		{"no messages", `{"model":"m"}`, "missing_required_parameter", "Missing required parameter: 'messages'"},
		{"empty messages", `{"model":"m","messages":[]}`, "empty_array", "empty array"},
		{"unknown role", req(`{"role":"robot","content":"x"}`), "invalid_value", "Invalid value: 'robot'"},
		{"unknown message field", req(`{"role":"user","content":"q","reasoning_content":"x"}`), "", "'reasoning_content' was unexpected"},
		{"user without content", req(`{"role":"user"}`), "missing_required_parameter", "messages[0].content"},
		{"assistant null content no calls", req(user + `,{"role":"assistant","content":null}`), "missing_required_parameter", "messages[1].content"},
		{"tool content not text", req(user + "," + callA + `,{"role":"tool","tool_call_id":"a","content":[{"type":"image_url"}]}`), "invalid_value", "'image_url'"},
		{"tool content missing", req(user + "," + callA + `,{"role":"tool","tool_call_id":"a"}`), "missing_required_parameter", "messages[2].content"},
		{"tool without id", req(user + "," + callA + `,{"role":"tool","content":"r"}`), "missing_required_parameter", "tool_call_id"},
		{"call unanswered at end", req(user + "," + callAB + "," + answerA), "", "did not have response messages: b"},
		{"call unanswered before user", req(user + "," + callA + "," + user), "", "did not have response messages: a"},
		{"call unanswered before assistant", req(user + "," + callA + "," + assistant), "", "did not have response messages: a"},
		{"tool answer without call", req(user + "," + answerA), "", "must be a response to a preceeding message with 'tool_calls'"},
		{"tool answers twice", req(user + "," + callA + "," + answerA + "," + answerA), "", "must be a response to a preceeding message"},
		{"call without id", req(user + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}`), "missing_required_parameter", "tool_calls[0].id"},
		{"call without arguments", req(user + `,{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f"}}]}`), "missing_required_parameter", "tool_calls[0].function"},

		{"129 tools", req(user, tools(many)), "array_above_max_length", "maximum length 128, but got an array with length 129"},
		{"tool type", req(user, tools(`{"type":"retrieval"}`)), "invalid_value", "'retrieval'"},
		{"tool without function", req(user, tools(`{"type":"function"}`)), "missing_required_parameter", "tools[0].function"},
		{"name with dot", req(user, tools(fnTool("learn.search", `{"type":"object","properties":{}}`))), "invalid_value", "does not match pattern"},
		{"name with space", req(user, tools(fnTool("a b", `{"type":"object","properties":{}}`))), "invalid_value", "does not match pattern"},
		{"name empty", req(user, tools(fnTool("", `{"type":"object","properties":{}}`))), "invalid_value", "does not match pattern"},
		{"name 65", req(user, tools(fnTool(strings.Repeat("n", 65), `{"type":"object","properties":{}}`))), "string_above_max_length", "maximum length 64"},
		{"description 1025", req(user, tools(`{"type":"function","function":{"name":"f","description":"`+strings.Repeat("d", 1025)+`"}}`)), "string_above_max_length", "maximum length 1024, but got a string with length 1025"},
		{"schema without properties", req(user, tools(fnTool("get_html_element_name", `{"type":"object","additionalProperties":false}`))), "invalid_function_parameters",
			"Invalid schema for function 'get_html_element_name': In context=(), object schema missing properties."},
		{"schema without type", req(user, tools(fnTool("f", `{"properties":{}}`))), "invalid_function_parameters", `got 'type: "None"'`},
		{"schema not an object", req(user, tools(fnTool("f", `"x"`))), "invalid_type", "expected an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Validate([]byte(tt.body))
			if tt.want == "" {
				if e != nil {
					t.Fatalf("refused: %s", e.Message)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted, want a refusal containing %q", tt.want)
			}
			if !strings.Contains(e.Message, tt.want) || e.Type != "invalid_request_error" || deref(e.Code) != tt.code {
				t.Errorf("got %q (type %s, code %q), want one containing %q with code %q", e.Message, e.Type, deref(e.Code), tt.want, tt.code)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestWriteErrorShape(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, Validate([]byte(req(user, tools(fnTool("f", `{"type":"object"}`))))))
	if w.Code != 400 {
		t.Errorf("status %d, want 400", w.Code)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"message": "Invalid schema for function 'f': In context=(), object schema missing properties.",
		"type": "invalid_request_error", "param": "tools[0].function.parameters", "code": "invalid_function_parameters"}
	if fmt.Sprint(got["error"]) != fmt.Sprint(want) {
		t.Errorf("body %s, want error %v", w.Body, want)
	}
}
