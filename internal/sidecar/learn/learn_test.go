package learn

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckSchema(t *testing.T) {
	tool, _ := Lookup(ToolCodeSampleSearch)
	tests := []struct {
		name    string
		schema  string
		wantErr string
	}{
		{"published", `{"type":"object","properties":{"query":{"type":"string"},"language":{"type":"string"}},"required":["query"]}`, ""},
		{"descriptions may change", `{"type":"object","properties":{"query":{"type":"string","description":"new"},"language":{"type":"string"}},"required":["query"],"additionalProperties":false}`, ""},
		{"argument removed", `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`, `argument "language" is missing`},
		{"argument added", `{"type":"object","properties":{"query":{"type":"string"},"language":{"type":"string"},"top":{"type":"integer"}},"required":["query"]}`, `unexpected argument "top"`},
		{"type changed", `{"type":"object","properties":{"query":{"type":"array"},"language":{"type":"string"}},"required":["query"]}`, `argument "query" has type "array"`},
		{"required changed", `{"type":"object","properties":{"query":{"type":"string"},"language":{"type":"string"}},"required":["query","language"]}`, "required is [language query]"},
		{"not an object", `{"type":"string"}`, `type is "string"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(tc.schema), &m); err != nil {
				t.Fatal(err)
			}
			err := tool.CheckSchema(m)
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("CheckSchema = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPublishedSchemasCheckThemselves(t *testing.T) {
	for _, tool := range Tools() {
		b, _ := json.Marshal(tool.Schema())
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if err := tool.CheckSchema(m); err != nil {
			t.Errorf("%s: %v", tool.Name, err)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) found a tool")
	}
}
