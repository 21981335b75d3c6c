package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// callArgs decodes and checks one tool call's arguments against the tool's
// schema, as robust agent frameworks do: keys the tool does not declare are
// dropped (and returned, to be recorded), because real models add them and
// the schema is not sent as strict; a missing required argument, a value of
// the wrong JSON type, or arguments that are not a JSON object are refused
// with a reason the model can act on.
func callArgs(s toolSchema, raw string) (args map[string]any, ignored []string, err error) {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
		return nil, nil, fmt.Errorf("the arguments are not a JSON object (got %.200q)", raw)
	}
	for k := range args {
		if _, ok := s.properties[k]; !ok && s.closed {
			ignored = append(ignored, k)
			delete(args, k)
		}
	}
	sort.Strings(ignored)
	var problems []string
	for _, r := range s.required {
		if _, ok := args[r]; !ok {
			problems = append(problems, fmt.Sprintf("missing required argument %q", r))
		}
	}
	for _, k := range sortedKeys(args) {
		if want := declaredTypes(s.properties[k]); len(want) > 0 && !hasType(args[k], want) {
			problems = append(problems, fmt.Sprintf("argument %q must be %s, got %s", k, strings.Join(want, " or "), jsonType(args[k])))
		}
	}
	if len(problems) > 0 {
		return nil, ignored, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return args, ignored, nil
}

// declaredTypes reads a property schema's "type" (a name or a list).
func declaredTypes(prop json.RawMessage) []string {
	var p struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(prop, &p) != nil || p.Type == nil {
		return nil
	}
	var one string
	if json.Unmarshal(p.Type, &one) == nil {
		return []string{one}
	}
	var many []string
	json.Unmarshal(p.Type, &many)
	return many
}

func hasType(v any, types []string) bool {
	got := jsonType(v)
	for _, t := range types {
		if t == got || (t == "number" && got == "integer") {
			return true
		}
		if t != "string" && t != "integer" && t != "number" && t != "boolean" && t != "array" && t != "object" && t != "null" {
			return true // a type this check does not know: the tool's to judge
		}
	}
	return false
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
